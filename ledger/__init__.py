"""Append-only, event-sourced ledger: events, recorders, projections."""
