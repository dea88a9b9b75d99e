"""The organization's overview (GET /v1/usage): balance, spend per day, spend by model, errors.

Read from the ledger's `usage_daily` rollup, so the cost is a few rows per day and model
whatever the size of the request log. Days are UTC days.
"""

import time
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal

import msgspec

from gateway.edge.parsing import WholeNumber
from gateway.edge.errors import ApiError
from gateway.jsonio import number
from gateway.services import Caller, Services
from ledger import queries
from ledger.money import from_nano
from ledger.queries import DailyUsage
from ledger.projections import US_PER_DAY

DEFAULT_DAYS = 30
MAX_DAYS = 90
DAYS = WholeNumber("days", 1, MAX_DAYS, DEFAULT_DAYS, "UTC days to cover, today included")


class Tally(msgspec.Struct):
    """Sums over some of the rollup's rows."""

    requests: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd_nano: int = 0
    charged_inr_nano: int = 0

    def add(self, row: DailyUsage) -> None:
        _day, _route, _model, status, requests, prompt, completion, usd, inr = row
        self.requests += requests
        self.errors += requests if is_error(status) else 0
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.cost_usd_nano += usd
        self.charged_inr_nano += inr

    def money(self) -> dict:
        return {"requests": self.requests, "errors": self.errors,
                "spend_inr": number(from_nano(self.charged_inr_nano)),
                "cost_usd": number(from_nano(self.cost_usd_nano))}

    def tokens(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


def is_error(status: int) -> bool:
    """What the overview counts as a failed request: any 4xx or 5xx, client disconnects included."""
    return status >= 400


def error_rate(tally: Tally) -> Decimal:
    """Failed requests over all requests, to four places; 0 when there were none."""
    if not tally.requests:
        return Decimal(0)
    return (Decimal(tally.errors) / tally.requests).quantize(Decimal("0.0001"))


def day_text(day: int) -> str:
    return datetime.fromtimestamp(day * 86_400, UTC).date().isoformat()


async def overview(services: Services, caller: Caller, days: int, now_us: int | None = None) -> dict:
    """The org's balance and the last `days` UTC days of use, today included. `held_inr` is what
    running requests hold, `escrow_inr` what escrow slices (credit taken ahead) hold."""
    async with services.recorder.snapshot():
        org = await queries.org(services.recorder, caller.org_id)
        escrow = await queries.org_escrow(services.recorder, caller.org_id)
    if org is None:
        raise ApiError(404, "the organization of this key no longer exists", type="not_found")
    _org_id, name, retention, credits, spent, held = org
    today = (now_us if now_us is not None else time.time_ns() // 1000) // US_PER_DAY
    first = today - days + 1
    usage = await queries.daily_usage(services.recorder, caller.org_id, first)
    return {"object": "usage", "org_id": caller.org_id, "org_name": name, "retention": retention,
            "balance_inr": number(from_nano(credits - spent)), "credits_inr": number(from_nano(credits)),
            "spent_inr": number(from_nano(spent)), "held_inr": number(from_nano(held - escrow)),
            "escrow_inr": number(from_nano(escrow)),
            "usd_to_inr": number(services.config.billing.usd_to_inr),
            "days": days, "since": day_text(first), "until": day_text(today),
            **summary(usage, range(first, today + 1))}


def summary(rows: list[DailyUsage], days: Iterable[int]) -> dict:
    """Totals, a zero-filled series per day, the models by spend, and what the log's filters offer."""
    total = Tally()
    by_day: defaultdict[int, Tally] = defaultdict(Tally)
    by_model: defaultdict[str, Tally] = defaultdict(Tally)
    for row in rows:
        for tally in (total, by_day[row.day], by_model[row.model]):
            tally.add(row)
    models = sorted(by_model.items(), key=lambda item: (-item[1].charged_inr_nano, -item[1].requests, item[0]))
    return {
        "totals": {**total.money(), "error_rate": number(error_rate(total)), **total.tokens()},
        "daily": [{"date": day_text(day), **by_day[day].money()} for day in days],
        "by_model": [{"model": model, **tally.money(), **tally.tokens()} for model, tally in models],
        "routes": sorted({row.route for row in rows}), "models": sorted(by_model),
        "statuses": sorted({row.status for row in rows})}
