"""Operations: Prometheus metrics, the health check, a request's facts, log setup, and the
routes that answer them (GET /, /metrics, /openapi.json)."""
