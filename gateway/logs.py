"""Structured logging: JSON lines through orjson, one canonical line per request.

Secrets never reach the output: a processor masks anything shaped like an API key.
"""

import logging
import re
import sys

import orjson
import structlog

# Our keys (gwk_...), OpenAI-style keys (sk-...), Google keys (AIza...), and bearer tokens.
_SECRET = re.compile(r"(gwk_[A-Za-z0-9_-]{8,}|sk-[A-Za-z0-9_-]{8,}|AIza[0-9A-Za-z_-]{20,}|"
                     r"(?i:bearer)\s+\S+)")


def mask_secrets(text: str) -> str:
    """`text` with every key-shaped substring replaced."""
    return _SECRET.sub("[redacted]", text)


def _mask(value: object) -> object:
    return mask_secrets(value) if isinstance(value, str) else value


def redact_secrets(_logger: object, _method: str, event_dict: dict) -> dict:
    """Mask key-shaped strings in every field, whatever the caller put there."""
    return {key: _mask(value) for key, value in event_dict.items()}


def configure(level: int = logging.INFO, **always: object) -> None:
    """JSON lines on stderr; `always` fields (a worker's pid, say) go on every line."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            *([lambda _logger, _method, event: {**always, **event}] if always else []),
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redact_secrets,
            structlog.processors.JSONRenderer(serializer=orjson.dumps),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.BytesLoggerFactory(sys.stderr.buffer),
        cache_logger_on_first_use=True,
    )
