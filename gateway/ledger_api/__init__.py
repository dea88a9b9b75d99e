"""The ledger, as an organization sees it: its own events exported (GET /v1/ledger/events) and the
gateway's signed checkpoints (GET /v1/ledger/checkpoints, /v1/ledger/public-key), so a customer
can verify their bill offline (ledger.export_check).

- `routes`: GET /v1/ledger/events, /v1/ledger/checkpoints, /v1/ledger/public-key.
- `published`: what they answer, from ledger.export and ledger.checkpoints.
"""
