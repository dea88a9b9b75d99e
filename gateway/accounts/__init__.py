"""Accounts: organizations' keys and provider keys, sealing, key policy, rate limits, the
in-memory directory that authentication reads, and the operator's admin actions."""
