"""Budget periods in UTC: where the current one began and when the next begins.

Days are counted from the epoch (the unit of the `key_spend_daily` projection), so a period's
spend is a sum over its days, read under the ledger's write lock when a hold is checked.
"""

from datetime import UTC, datetime, timedelta

US_PER_DAY = 86_400_000_000


def day_of(at_us: int) -> int:
    """The UTC day (days since the epoch) of an instant in microseconds."""
    return at_us // US_PER_DAY


def _moment(at_us: int) -> datetime:
    return datetime.fromtimestamp(at_us / 1_000_000, UTC)


def _month_start(at_us: int) -> datetime:
    return _moment(at_us).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def first_day(period: str, at_us: int) -> int:
    """The first UTC day of `period` ("day", "month", "total") holding `at_us`."""
    match period:
        case "day":
            return day_of(at_us)
        case "month":
            return (_month_start(at_us).date() - datetime(1970, 1, 1, tzinfo=UTC).date()).days
    return 0


def next_reset_us(period: str, at_us: int) -> int | None:
    """When the period holding `at_us` ends (None: a total budget never resets)."""
    match period:
        case "day":
            return (day_of(at_us) + 1) * US_PER_DAY
        case "month":
            start = _month_start(at_us)
            following = (start + timedelta(days=32)).replace(day=1)
            return int(following.timestamp()) * 1_000_000
    return None
