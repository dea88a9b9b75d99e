"""How long the ledger waits for its database, and how a backend reports that it could not.

Each backend names the driver failures that mean "the database is down, unreachable or too
slow" (as opposed to "this write is wrong") and raises them as LedgerUnavailable, so callers
handle one exception whichever driver is underneath.
"""

import contextlib
import functools
from collections.abc import Awaitable, Callable, Iterator

from ledger.recorder import LedgerUnavailable

STATEMENT_TIMEOUT_S = 3.0  # one statement, a pooled connection, or SQLite's write lock
CONNECT_TIMEOUT_S = 2.0  # establishing a new connection to a database server
# Opening with a schema upgrade: the upgrade backfills projections and may take a while, once,
# while every other process opening the same store (workers started together) waits for it.
MIGRATE_TIMEOUT_S = 600.0


@contextlib.contextmanager
def unavailable_on(is_outage: Callable[[BaseException], bool]) -> Iterator[None]:
    """Raise what `is_outage` recognises, inside the block, as LedgerUnavailable."""
    try:
        yield
    except Exception as exc:  # re-raised as it is unless it is an outage: nothing is hidden
        if not is_outage(exc):
            raise
        raise LedgerUnavailable(f"the ledger database is unavailable: {type(exc).__name__}: {exc}"[:500]) from exc


def reporting_outages(is_outage: Callable[[BaseException], bool]):
    """Decorate an async method so that the outages `is_outage` recognises raise LedgerUnavailable."""
    def decorate(method: Callable[..., Awaitable]) -> Callable[..., Awaitable]:
        @functools.wraps(method)
        async def translated(*args, **kwargs):
            with unavailable_on(is_outage):
                return await method(*args, **kwargs)
        return translated
    return decorate
