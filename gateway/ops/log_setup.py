"""Structured logging: JSON lines through orjson, one canonical line per request.

Secrets never reach the output: a processor masks anything shaped like an API key and removes
every configured provider key by value (a defence in depth: upstream text is already redacted
where it enters the gateway, see gateway.accounts.redaction).

Two roads to the same output. structlog's own lines (the gateway's) are rendered straight to
stderr's bytes: the canonical request line is on the hot path and never touches `logging`. The
standard library's loggers (ledger, storage, aiohttp, asyncio) go through one root handler whose
formatter is structlog's `ProcessorFormatter`, so their lines get the same level, timestamp,
redaction and JSON, plus the logger's name, and a traceback as the `exception` field.
"""

import logging
import sys
from typing import Any

import orjson
import structlog
from structlog.typing import EventDict, Processor

from gateway.accounts.redaction import Redactor

__all__ = ["Redacting", "configure"]


class Redacting:
    """The processor: every string field without the configured keys and key-shaped strings."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor

    def __call__(self, _logger: object, _method: str, event_dict: EventDict) -> EventDict:
        # One pass over every string at once decides whether any needs redacting (nothing is
        # found in one field that is not found in them all); the usual line needs none.
        joined = "\x00".join(value for value in event_dict.values() if isinstance(value, str))
        if self._redactor(joined) == joined:
            return event_dict
        return {key: self._redactor(value) if isinstance(value, str) else value
                for key, value in event_dict.items()}


def configure(level: int = logging.INFO, redactor: Redactor | None = None, **always: object) -> None:
    """JSON lines on stderr, from structlog and the standard library's loggers alike; `always`
    fields (a worker's pid, say) go on every line; `redactor` knows the configured provider keys
    (without one, only key-shaped strings are masked). Calling it again replaces the set-up."""
    stamped: list[Processor] = [*([lambda _logger, _method, event: {**always, **event}] if always else []),
               structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso", utc=True)]
    rendered: list[Processor] = [structlog.processors.format_exc_info, Redacting(redactor or Redactor())]
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, *stamped, *rendered,
                    structlog.processors.JSONRenderer(serializer=orjson.dumps)],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.BytesLoggerFactory(sys.stderr.buffer),
        cache_logger_on_first_use=True,
    )
    _route_standard_logging(level, [structlog.stdlib.add_logger_name, *stamped], rendered)


class _JsonLines(logging.StreamHandler):
    """The root handler `configure` installs (its class tells it apart from anyone else's)."""


def _route_standard_logging(level: int, stamped: list[Processor], rendered: list[Processor]) -> None:
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.contextvars.merge_contextvars, *stamped,
                           structlog.stdlib.ExtraAdder()],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendered,
                    structlog.processors.JSONRenderer(serializer=_json_text)])
    handler = _JsonLines(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _JsonLines)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def _json_text(event: dict, **kwargs: Any) -> str:
    """orjson for the standard library's lines too; a formatter returns text, not bytes."""
    return orjson.dumps(event, **kwargs).decode()
