"""The dashboard: its page and the JSON API it reads, an organization's own view of its account.

Its routes are declared in `routes.ENDPOINTS` (gateway.routes lists them); nothing is imported here.

- `routes`: the handlers of GET /v1/usage, /v1/statements, /v1/logs, /v1/keys (and POST, DELETE,
  PATCH) and of the page, and their endpoints.
- `usage`: the overview: balance, spend per day and per model, error rate (GET /v1/usage).
- `request_log`: the request log, paged by position, and one request with its text (GET /v1/logs).
- `org_keys`: the organization's API keys: list, create, revoke (/v1/keys).
- `batches`: the organization's batches of both APIs: progress, cost and files (GET /v1/dashboard/batches).
- `statements`: a UTC month's statement, JSON and CSV, from the ledger's rollups (GET /v1/statements).
- `page`: GET /dashboard and its files in static/ (HTML, CSS, ES modules; no build step).
"""
