"""Operations: Prometheus metrics, the health check, a request's facts, and log setup."""
