"""The sweeper process: its resources, one pass or a pass every interval, and its pass lines.

Without --once it sweeps every `sweeper.interval_s`, give or take a tenth (so sweepers started
together drift apart), and on SIGTERM or SIGINT it finishes the page in hand and exits 0.
"""

import asyncio
import contextlib
import random
import signal
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import msgspec
import orjson
import structlog

from ledger.backends import recorder_for
from ledger.signing import Signer
from storage.files import file_store, local_root
from storage.settings import open_store
from sweeper.settings import Settings
from sweeper.sweep import PassReport, Sweeper

JITTER = 0.1


@contextlib.asynccontextmanager
async def open_sweeper(settings: Settings) -> AsyncIterator[Sweeper]:
    """The ledger and (if configured) the bucket, which must already exist: a sweeper never
    creates one, so a mistyped bucket name fails loudly instead of 'deleting' from an empty one.
    Kept files are swept in the bucket too, else in the local files directory."""
    recorder = recorder_for(settings.ledger.url)
    await recorder.open()
    try:
        async with open_store(settings.storage, create_bucket=False) as store:
            files = file_store(store, local_root(settings.batches.files_path, settings.ledger.url))
            yield Sweeper(recorder, store, settings.storage.retention_days, settings.retention.text_days,
                          checkpoint_interval_s=settings.ledger.checkpoint_interval_s,
                          signer=Signer.configured(settings.ledger.signing_key), files=files,
                          origin=settings.ledger.log_origin)
    finally:
        await recorder.close()


def log_pass(report: PassReport) -> None:
    """The pass's one log line; a dry run's keys go to stdout, one JSON line each."""
    fields = msgspec.structs.asdict(report)
    would_delete = fields.pop("would_delete")
    level = "warning" if report.failed or report.ledger_problems else "info"
    getattr(structlog.get_logger(), level)("sweep_pass", **fields)
    if report.dry_run:
        sys.stdout.buffer.write(b"".join(orjson.dumps({"would_delete": key}) + b"\n" for key in would_delete))
        sys.stdout.flush()


async def sweep_once(settings: Settings, as_of: datetime, dry_run: bool) -> int:
    """One pass; exit status 1 when any deletion failed or the ledger did not verify."""
    async with open_sweeper(settings) as sweeper:
        report = await sweeper.run_pass(as_of, dry_run)
    log_pass(report)
    return 1 if report.failed or report.ledger_problems else 0


async def sweep_forever(settings: Settings, as_of: datetime | None, dry_run: bool) -> int:
    """A pass every interval until SIGTERM or SIGINT; --as-of shifts the clock by a fixed offset."""
    offset = (as_of - datetime.now(UTC)) if as_of else None
    async with open_sweeper(settings) as sweeper:
        _stop_on_signals(sweeper.stopping)
        while not sweeper.stopping.is_set():
            now = datetime.now(UTC)
            log_pass(await sweeper.run_pass(now + offset if offset else now, dry_run))
            await _sleep(settings.sweeper.interval_s * random.uniform(1 - JITTER, 1 + JITTER),
                         sweeper.stopping)
    structlog.get_logger().info("sweeper_stopped")
    return 0


def _stop_on_signals(stopping: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)


async def _sleep(seconds: float, stopping: asyncio.Event) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), seconds)
