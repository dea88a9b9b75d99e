"""Operations: what an operator reads of a running gateway.

- `metrics`: Prometheus metrics (GET /metrics).
- `health`: the health report (GET /).
- `facts`: what one request turned out to be: its log line, metrics and cost headers read it.
- `log_setup`: structured logging, JSON lines.
- `checkpointing`: the gateway's own signed checkpoints, every [ledger] checkpoint_interval_s.
- `routes`: the handlers of GET /, /metrics and /openapi.json, and their endpoints.
"""
