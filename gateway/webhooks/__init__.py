"""Alerts to the outside world, as Standard Webhooks: an org's admin registers endpoints
(subscriptions), alerts are derived from the org's ledger events (alerts), and one process at a
time delivers them in order from each endpoint's durable cursor (delivery), signed (signing), to
destinations checked against SSRF (destinations), retried with backoff (backoff)."""
