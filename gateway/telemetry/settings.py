"""Whether traces are on, and where they go, as the OTLP exporter's specification orders the
settings: the standard OTEL_* variables first, then `[telemetry] otlp_endpoint`. Imports no part
of the OpenTelemetry SDK, so a gateway without traces never loads it."""

from collections.abc import Mapping

from gateway.config import TelemetryConfig

TRACES_PATH = "/v1/traces"


def otlp_endpoint(config: TelemetryConfig, environ: Mapping[str, str]) -> str | None:
    """The OTLP HTTP traces URL; None: tracing is off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    if signal := environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        return signal  # a signal's own endpoint is used as it is
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or config.otlp_endpoint.strip()
    if not base:
        return None
    return base if base.rstrip("/").endswith(TRACES_PATH) else base.rstrip("/") + TRACES_PATH
