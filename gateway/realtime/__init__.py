"""The Realtime API: a WebSocket relayed to the provider's realtime API, billed per response.

- `session`: one client WebSocket and its provider's, pumped both ways, billed from response.done.
- `routes`: the handler of GET /v1/realtime and its endpoint.
"""
