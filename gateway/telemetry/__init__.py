"""OpenTelemetry traces.

- `settings`: whether they are on and where they go (no SDK imported).
- `tracing`: the spans, exported by the SDK (imported only when traces are on).
"""
