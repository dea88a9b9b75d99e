"""Accounts: who may call, with which keys, within which limits.

- `keys`: API keys made, recognised, stored only as digests.
- `directory`: the in-memory view of keys, organizations and balances that authentication and the
  credit check read on every request, kept in step with the ledger.
- `key_policy`: a key's spend controls besides its budget: the models it may use, its expiry.
- `limits`: per-key rate limits (requests and tokens per minute) in Redis.
- `provider_keys`: organizations' own provider keys (BYOK), opened on first use.
- `sealing`: those keys sealed at rest (AES-256-GCM).
- `redaction`: every provider key removed, by value, from upstream text, logs and errors.
- `admin`: the operator's actions (organizations, keys, credits, limits) appended as events.
"""
