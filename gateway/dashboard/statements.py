"""The organization's monthly statement (GET /v1/statements/YYYY-MM): its balance at the start and
end of a UTC month, the credits added and the charges made in it, by model, key and day.

Read from the ledger's `balance_daily` and `charges_daily` rollups (ledger.projections), so it
costs a few rows a day whatever the number of requests. Every figure is exact, in nano-rupees:
- opening balance: the credits added before the month less the charges made before it;
- closing balance: opening + credits - charges (holds never change the balance);
- held: what the holds of requests still running at the end of the month held, and apart
  escrow: what escrow slices (credit a process took ahead for its requests) held then (today's,
  for the current month). Until schema 11, `held_inr` was the sum of both.
"""

import calendar
import csv
import io
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import date
from decimal import Decimal
from typing import Any, NamedTuple

from gateway.edge.errors import bad_request
from ledger import queries
from ledger.money import format_amount, from_nano
from ledger.queries import DailyCharge
from ledger.recorder import Recorder

MONTH = re.compile(r"([0-9]{4})-([0-9]{2})")  # ASCII digits: \d would take any script's
EPOCH = date(1970, 1, 1)
FORMATS = ("json", "csv")
CSV_HEADER = ("day", "key_id", "model", "requests", "charged_inr")


class Month(NamedTuple):
    """A UTC month as the ledger counts days: [first_day, end_day) since the epoch."""
    text: str
    first_day: int
    end_day: int


def parse_month(text: str) -> Month:
    """`YYYY-MM` (1970-01 to 9999-12); 400 naming what is wrong."""
    if not (match := MONTH.fullmatch(text)):
        raise bad_request(f"the month must be written YYYY-MM, such as 2025-01, got {text!r}", "month")
    year, month = int(match[1]), int(match[2])
    if not 1 <= month <= 12:
        raise bad_request(f"there is no month {month:02d}: a month is 01 to 12", "month")
    if year < EPOCH.year:
        raise bad_request(f"the ledger starts in {EPOCH.year}: no statement for {text}", "month")
    first = (date(year, month, 1) - EPOCH).days
    return Month(text, first, first + calendar.monthrange(year, month)[1])


def wants_csv(query: Mapping[str, str], accept: str) -> bool:
    """`?format=csv`, or no format asked and an Accept naming text/csv."""
    if (asked := query.get("format")) is None:
        return "text/csv" in accept
    if asked not in FORMATS:
        raise bad_request(f"format must be one of {', '.join(FORMATS)}, got {asked!r}", "format")
    return asked == "csv"


def amount(nano: int) -> str:
    return format_amount(from_nano(nano))


def day_text(day: int) -> str:
    return date.fromordinal(EPOCH.toordinal() + day).isoformat()


class Tally(NamedTuple):
    requests: int
    charged_inr_nano: int

    def plus(self, row: DailyCharge) -> "Tally":
        return Tally(self.requests + row.requests, self.charged_inr_nano + row.charged_inr_nano)

    def render(self) -> dict:
        return {"requests": self.requests, "charged_inr": amount(self.charged_inr_nano)}


def tallied(rows: Iterable[DailyCharge], group: str) -> list[dict]:
    """The rows summed per value of `group` ("model", "key_id" or "day"), in its order."""
    tallies: defaultdict[Any, Tally] = defaultdict(lambda: Tally(0, 0))
    for row in rows:
        value = getattr(row, group)
        tallies[value] = tallies[value].plus(row)
    shown = day_text if group == "day" else str
    return [{group: shown(value), **tallies[value].render()} for value in sorted(tallies)]


def rate_order(rate: str) -> tuple[int, Decimal | str]:
    """Rates by value (one recorded as other text than a number, last)."""
    try:
        value = Decimal(rate)
    except ArithmeticError:
        return 1, rate
    return (0, value) if value.is_finite() else (1, rate)


def rates_used(rows: Iterable[DailyCharge]) -> list[str]:
    """The USD->INR rates the rows' requests were priced at, in order of value; "0" is what a
    request that priced nothing (one that failed before its upstream answered) records."""
    return sorted({row.usd_to_inr for row in rows if rate_order(row.usd_to_inr) != (0, Decimal(0))}, key=rate_order)


async def statement(recorder: Recorder, org_id: str, month: Month) -> dict:
    """The org's statement for `month`, every amount an exact decimal string."""
    totals = await queries.month_totals(recorder, org_id, month.first_day, month.end_day)
    rows = await queries.daily_charges(recorder, org_id, month.first_day, month.end_day)
    charges = sum(row.charged_inr_nano for row in rows)
    opening = totals.credits_before_inr_nano - totals.charged_before_inr_nano
    return {"object": "statement", "org_id": org_id, "month": month.text,
            "opening_balance_inr": amount(opening), "credits_inr": amount(totals.credits_inr_nano),
            "charges_inr": amount(charges), "closing_balance_inr": amount(opening + totals.credits_inr_nano - charges),
            "held_inr": amount(totals.held_inr_nano), "escrow_inr": amount(totals.escrow_inr_nano),
            "requests": sum(row.requests for row in rows),
            "by_model": tallied(rows, "model"), "by_key": tallied(rows, "key_id"), "by_day": tallied(rows, "day"),
            "usd_to_inr_rates": rates_used(rows)}


async def charges_csv(recorder: Recorder, org_id: str, month: Month) -> str:
    """The month's charges as CSV: one row per day, key and model (its rates summed), in that order."""
    rows = await queries.daily_charges(recorder, org_id, month.first_day, month.end_day)
    tallies: dict[tuple[int, str, str], Tally] = {}
    for row in rows:  # already in (day, key, model, rate) order: a group's rows are adjacent
        group = (row.day, row.key_id, row.model)
        tallies[group] = tallies.get(group, Tally(0, 0)).plus(row)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    writer.writerows((day_text(day), key_id, model, t.requests, amount(t.charged_inr_nano))
                     for (day, key_id, model), t in tallies.items())
    return out.getvalue()
