"""Routing one model over several providers: preferences, circuits, failover."""
