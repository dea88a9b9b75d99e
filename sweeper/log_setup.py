"""The sweeper's log lines: JSON on stderr through orjson, its own and the standard library's.

structlog's lines (`sweep_pass`, `sweeper_stopped`) are rendered straight to stderr's bytes. The
standard library's loggers (ledger, storage, botocore, asyncio) go through one root handler whose
formatter is structlog's ProcessorFormatter, so they come out as JSON lines too, with the same
level and timestamp, the logger's name, and a traceback as the `exception` field. The gateway
sets up its own lines the same way; the sweeper imports nothing of the gateway.
"""

import logging
import sys
from typing import Any

import orjson
import structlog
from structlog.typing import Processor


def configure(level: int = logging.INFO) -> None:
    """Route every log line of the process, structlog's and the standard library's, to stderr as
    JSON; the standard library's below `level` are dropped. Calling it again replaces the set-up."""
    stamped: list[Processor] = [structlog.processors.add_log_level,
                                structlog.processors.TimeStamper(fmt="iso", utc=True)]
    structlog.configure(
        processors=[*stamped, structlog.processors.JSONRenderer(serializer=orjson.dumps)],
        logger_factory=structlog.BytesLoggerFactory(sys.stderr.buffer))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *stamped],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info,
                    structlog.processors.JSONRenderer(serializer=_json_text)]))
    logging.basicConfig(handlers=[handler], level=level, force=True)  # force: replaces any root handler


def _json_text(event: dict, **kwargs: Any) -> str:
    """orjson for the standard library's lines too; a formatter returns text, not bytes."""
    return orjson.dumps(event, **kwargs).decode()
