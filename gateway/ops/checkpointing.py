"""The gateway keeps its own checkpoints: every `[ledger] checkpoint_interval_s` it verifies the
chains appended since the last one and records a new one, signed with `[ledger] signing_key`
(ledger.checkpoints, ledger.signing). The sweeper does the same; whichever comes first records
it, and the other finds it recent. Chains only, never the projections (that is `verify --full`,
a job for a separate process): the work comes in batches between which requests are served."""

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

import structlog

from ledger import audit, checkpoints
from ledger.recorder import LedgerError, Recorder
from ledger.signing import Signer

log = structlog.get_logger("gateway.ops.checkpointing")
# Events checked between two turns of the event loop: ~2.5 ms of it held per batch (5,000, an
# audit's batch, held it ~25 ms, which every request on this process would wait out).
BATCH = 500
Sleep = Callable[[float], Awaitable[None]]


async def keep(recorder: Recorder, signer: Signer | None, interval_s: float, sleep: Sleep = asyncio.sleep, *,
               origin: str = checkpoints.ORIGIN) -> None:
    """Until cancelled: a checkpoint whenever the last is `interval_s` old. Each wait ends a little
    late, by chance, and is then measured again: of the processes sharing a ledger (workers,
    replicas), the first to wake records it and the others find it recent."""
    started = time.monotonic()
    while True:
        try:
            if (due := await _due_in(recorder, interval_s, time.monotonic() - started)) > 0:
                await sleep(due + random.uniform(0, interval_s / 10))
            elif not await _record(recorder, signer, origin):  # nothing new, or it does not verify: not again at once
                await sleep(interval_s)
        except LedgerError as exc:  # the database away or a timeout: try again an interval later
            log.warning("checkpoint_failed", error=str(exc))
            await sleep(interval_s)


async def _due_in(recorder: Recorder, interval_s: float, running_s: float) -> float:
    """How long until the next checkpoint is due: an interval after the last, or (none yet) after
    this process started (`running_s` ago)."""
    latest = await checkpoints.latest(recorder)
    return max(0.0, interval_s - (running_s if latest is None else latest.age_s()))


async def _record(recorder: Recorder, signer: Signer | None, origin: str) -> bool:
    """Whether a checkpoint was recorded."""
    verified, position = await audit.keep_verified(recorder, signer=signer, with_projections=False, batch=BATCH,
                                                   origin=origin)
    if verified.problems:
        log.error("ledger_does_not_verify", problems=verified.problems[:10], verified_upto=verified.upto)
    elif position is not None:
        log.info("checkpoint_recorded", position=position, verified_upto=verified.upto,
                 signed=signer is not None, events_checked=verified.checked)
    return position is not None
