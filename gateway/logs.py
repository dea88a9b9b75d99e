"""Structured logging: JSON lines through orjson, one canonical line per request.

Secrets never reach the output: a processor masks anything shaped like an API key and removes
every configured provider key by value (a defence in depth: upstream text is already redacted
where it enters the gateway, see gateway.redaction).
"""

import logging
import sys

import orjson
import structlog

from gateway.redaction import Redactor

__all__ = ["configure", "Redacting"]


class Redacting:
    """The processor: every string field without the configured keys and key-shaped strings."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor

    def __call__(self, _logger: object, _method: str, event_dict: dict) -> dict:
        # One pass over every string at once decides whether any needs redacting (nothing is
        # found in one field that is not found in them all); the usual line needs none.
        joined = "\x00".join(value for value in event_dict.values() if isinstance(value, str))
        if self._redactor(joined) == joined:
            return event_dict
        return {key: self._redactor(value) if isinstance(value, str) else value
                for key, value in event_dict.items()}


def configure(level: int = logging.INFO, redactor: Redactor | None = None, **always: object) -> None:
    """JSON lines on stderr; `always` fields (a worker's pid, say) go on every line; `redactor`
    knows the configured provider keys (without one, only key-shaped strings are masked)."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            *([lambda _logger, _method, event: {**always, **event}] if always else []),
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            Redacting(redactor or Redactor()),
            structlog.processors.JSONRenderer(serializer=orjson.dumps),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.BytesLoggerFactory(sys.stderr.buffer),
        cache_logger_on_first_use=True,
    )
