"""The retention sweeper: a standalone process that deletes hosted media once it is older than
the retention period and kept files once they expire, and, if the operator switches it on,
removes old logged text.

It imports `ledger` and `storage`, never `gateway`; several may run at once on different hosts.

- `settings`: its sections of the shared TOML file, with the same GATEWAY_* overrides.
- `worklist`: what is due, read from the ledger's projections through partial indexes.
- `sweep`: one pass (delete first, then mark) and its report.
- `file_sweep`: kept files past their expiry, deleted the same way (bytes, then FileDeleted).
- `runner`: the loop, its signals, and its one log line per pass; `cli`: the command line.
- `log_setup`: every line on stderr as JSON, the standard library's loggers' too.
"""
