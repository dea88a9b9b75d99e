"""Running audit work in several processes: each opens the stores it works on by their URLs.

A task is a coroutine function whose first arguments are recorders. In-process (one worker) it
runs on the caller's own open recorders, one task after another; with more workers each task runs
in a process of the pool (spawned: no event loop, thread or connection is inherited), which opens
the same stores by `Recorder.url` (with `Recorder.opener`) and closes them when the task is done.
"""

import asyncio
import multiprocessing
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from types import TracebackType
from typing import Any

from ledger.recorder import Recorder

Task = Callable[..., Awaitable[Any]]


class Crew:
    """Runs tasks in this process (`workers` 1) or in a pool of `workers` processes."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    async def __aenter__(self) -> "Crew":
        if self.workers > 1:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        if self._pool is not None:
            await asyncio.to_thread(self._pool.shutdown, True, cancel_futures=True)

    async def map(self, task: Task, jobs: Sequence[tuple[Sequence[Recorder], tuple]]) -> list[Any]:
        """`task(*stores, *args)` for each (stores, args), results in order."""
        if self._pool is None:
            return [await task(*stores, *args) for stores, args in jobs]
        loop = asyncio.get_running_loop()
        return list(await asyncio.gather(*(
            loop.run_in_executor(self._pool, _in_worker, task, [(store.opener(), store.url) for store in stores], args)
            for stores, args in jobs)))


Opening = tuple[Callable[[str], Recorder], str]  # a store's opener and URL


def _in_worker(task: Task, openings: list[Opening], args: tuple) -> Any:
    return asyncio.run(_opened(task, openings, args))


async def _opened(task: Task, openings: list[Opening], args: tuple) -> Any:
    stores: list[Recorder] = []
    try:
        for opener, url in openings:
            stores.append(opener(url))
            await stores[-1].open(migrate=False)
        return await task(*stores, *args)
    finally:
        for store in stores:
            await store.close()
