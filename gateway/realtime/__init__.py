"""The Realtime API: a WebSocket relayed to the provider's realtime API, billed per response."""
