"""Alerts to the outside world, as Standard Webhooks: an org's admin registers endpoints, alerts
are derived from the org's ledger events, and one process at a time delivers them in order from
each endpoint's durable cursor.

- `routes`: POST/GET /v1/webhooks, GET/PATCH/DELETE /v1/webhooks/{id}, POST /v1/webhooks/{id}/test.
- `subscriptions`: what they do: endpoints as ledger events, their secrets sealed, shown once.
- `commands`: `gateway webhooks ...`, the same for an operator.
- `sealing`: what seals the secrets (the master key, or a key file beside a SQLite ledger).
- `alerts`: which alerts an org's events raise for an endpoint, and their stable ids.
- `delivery`: the loop that delivers them, at least once, in order, one process at a time.
- `signing`: Standard Webhooks signatures; `sending`: one delivery, bounded and checked;
  `destinations`: where a webhook may go (no SSRF); `backoff`: when to retry, when to give up.
"""
