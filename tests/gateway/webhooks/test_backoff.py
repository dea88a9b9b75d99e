"""gateway.webhooks.backoff: equal jitter from 5 s doubling to an hour, and when retrying stops."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.webhooks import backoff


def full_delay(attempt: int, first_s: float = 5.0) -> float:
    return min(3600.0, first_s * 2 ** (attempt - 1))


@pytest.mark.parametrize("attempt", range(1, 25))
def test_each_delay_is_between_half_and_all_of_the_doubled_one(attempt):
    full = full_delay(attempt)
    assert backoff.retry_delay_s(attempt, lambda: 0.0) == full / 2
    assert backoff.retry_delay_s(attempt, lambda: 0.5) == 0.75 * full
    assert full / 2 <= backoff.retry_delay_s(attempt, lambda: 0.999_999) <= full


def test_the_first_retry_comes_after_5_to_10_s_and_the_last_within_an_hour():
    assert 2.5 <= backoff.retry_delay_s(1, lambda: 0.0) < backoff.retry_delay_s(1, lambda: 0.999) <= 5.0
    assert backoff.retry_delay_s(11, lambda: 0.0) == 1800.0  # 5 * 2**10 passed the cap
    assert backoff.retry_delay_s(10_000, lambda: 0.999_999) <= 3600.0  # no overflow, still capped


@given(st.integers(min_value=-5, max_value=200), st.floats(min_value=0, max_value=1, exclude_max=True))
def test_delays_grow_with_the_attempt_and_stay_in_bounds(attempt, chance):
    delay, later = backoff.retry_delay_s(attempt, lambda: chance), backoff.retry_delay_s(attempt + 1, lambda: chance)
    assert backoff.FLOOR_S <= delay <= later <= 3600.0
    assert delay >= full_delay(max(attempt, 1)) / 2  # never early: half of it is fixed


def test_the_real_random_spreads_retries_and_a_smaller_first_delay_scales_them():
    delays = {backoff.retry_delay_s(3) for _ in range(50)}
    assert len(delays) > 1 and all(10.0 <= delay <= 20.0 for delay in delays)
    assert backoff.retry_delay_s(2, lambda: 0.0, first_s=0.2) == 0.2
    assert backoff.retry_delay_s(1, lambda: 0.0, first_s=0.000_1) == backoff.FLOOR_S


@pytest.mark.parametrize("retry_for_s, failing_us, gives_up", [
    (86_400, 86_400_000_000 - 1, False), (86_400, 86_400_000_000, True), (86_400, 86_400_000_001, True),
    (0.5, 499_999, False), (0.5, 500_000, True), (60, 0, False),
])
def test_gives_up_once_failing_for_the_whole_retry_time(retry_for_s, failing_us, gives_up):
    first = 1_700_000_000_000_000
    assert backoff.gives_up(first, first + failing_us, retry_for_s) is gives_up
