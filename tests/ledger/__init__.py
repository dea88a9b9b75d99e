"""The ledger: its contract run on each backend, and each backend's own tests."""
