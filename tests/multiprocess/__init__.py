"""Tests whose point is several processes: kill -9, replicas on one ledger, outages, scale-out."""
