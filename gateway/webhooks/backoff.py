"""When a failed delivery is tried again: exponential backoff with "equal jitter" (half the delay
fixed, half random, so retries of many endpoints spread out yet never come early), from the
first retry's delay doubling up to an hour; and when to stop trying and disable the endpoint."""

import random as _random
from collections.abc import Callable

FIRST_S = 5.0
CAP_S = 3600.0
# Not a whole second: tests run the delivery loop with retry_first_s far below one, and with the
# default first_s of 5 s no delay is under 2.5 s anyway. The floor only keeps a delay above zero.
FLOOR_S = 0.01


def retry_delay_s(attempt: int, random: Callable[[], float] = _random.random, first_s: float = FIRST_S) -> float:
    """The delay before retry number `attempt` (1: after the first failure; less counts as 1):
    with full = min(1 h, first_s * 2**(attempt - 1)), a delay in [full / 2, full], `random()`
    (in [0, 1)) placing it; never below FLOOR_S."""
    full = min(CAP_S, first_s * 2 ** min(max(attempt, 1) - 1, 30))
    return max(FLOOR_S, full / 2 + random() * full / 2)


def gives_up(first_failure_us: int, now_us: int, retry_for_s: float) -> bool:
    """Whether an endpoint failing since `first_failure_us` has been retried for long enough."""
    return now_us - first_failure_us >= retry_for_s * 1_000_000
