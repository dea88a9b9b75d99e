"""Append-only, event-sourced ledger: events, recorders, projections.

- `events`: the facts, frozen tagged msgspec Structs; `money` and `periods`: nano-units and UTC days.
- `recorder`: the contract every backend keeps (versions, positions, hashes, holds decided once);
  `backends/` holds the SQLite and PostgreSQL adapters and `recorder_for` (a URL to a recorder).
- `schema`: the tables and indexes; `projections`: which statements each event runs; `batches`:
  a batch of events as SQL runs (folded per row); `backfills`: filling columns added later.
- `writer`: group commit; `follower`: reading the log as it grows; `leases`: lapsed holds.
- `queries` and `log_queries`: the read API of the projections.
- `audit`: verify and replay; `chains`: hash chains; `checkpoints`: verified prefixes;
  `partitions`: shares of the streams; `parallel`: running audit work in several processes.
- `charges`: the pricing formula and the charging rule, stated once; `export`: an org's events as
  NDJSON; `export_check`: checking one offline; `signing`: Ed25519 signatures over checkpoints.
"""
