"""How long the ledger waits for its database, and how a backend reports that it could not.

Each backend names the driver failures that mean "the database is down, unreachable or too
slow" (as opposed to "this write is wrong") and raises them as LedgerUnavailable, so callers
handle one exception whichever driver is underneath.
"""

import contextlib
import functools
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, ParamSpec, TypeVar

from ledger.recorder import DatabaseError, LedgerUnavailable

STATEMENT_TIMEOUT_S = 3.0  # one statement, a pooled connection, or SQLite's write lock
CONNECT_TIMEOUT_S = 2.0  # establishing a new connection to a database server
# Opening with a schema upgrade: the upgrade backfills projections and may take a while, once,
# while every other process opening the same store (workers started together) waits for it.
MIGRATE_TIMEOUT_S = 600.0

P = ParamSpec("P")
T = TypeVar("T")


@contextlib.contextmanager
def unavailable_on(is_outage: Callable[[BaseException], bool],
                   driver_errors: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """Raise what `is_outage` recognises, inside the block, as LedgerUnavailable, and any other
    of the driver's `driver_errors` as DatabaseError."""
    try:
        yield
    except Exception as exc:  # re-raised as it is unless it is the driver's: nothing is hidden
        if is_outage(exc):
            raise LedgerUnavailable(_text("the ledger database is unavailable", exc)) from exc
        if isinstance(exc, driver_errors):
            raise DatabaseError(_text("the ledger database refused a statement", exc)) from exc
        raise


def _text(what: str, exc: BaseException) -> str:
    return f"{what}: {type(exc).__name__}: {exc}"[:500]


def reporting_outages(is_outage: Callable[[BaseException], bool],
                      driver_errors: tuple[type[BaseException], ...] = (),
                      ) -> Callable[[Callable[P, Coroutine[Any, Any, T]]], Callable[P, Coroutine[Any, Any, T]]]:
    """Decorate an async method so that the outages `is_outage` recognises raise LedgerUnavailable
    (and the other `driver_errors`, DatabaseError)."""
    def decorate(method: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        @functools.wraps(method)
        async def translated(*args: P.args, **kwargs: P.kwargs) -> T:
            with unavailable_on(is_outage, driver_errors):
                return await method(*args, **kwargs)
        return translated
    return decorate
