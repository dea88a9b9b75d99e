"""The reservation rules as plain functions: what a transcription holds (the other ceilings:
test_ceilings), that a charge is its true cost whatever was held, and budget periods in UTC."""

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from gateway.billing.charging import Outcome, request_event
from gateway.billing.pricing import Cost
from gateway.catalogue import Catalogue
from gateway.config import Config
from gateway.accounts.directory import Principal, SpendLimits
from gateway.accounts.key_policy import allows
from gateway.services import Caller
from gateway.audio.transcription import ceiling as transcription_ceiling
from ledger import periods
from ledger.events import CreditsHeld

CATALOGUE = Catalogue.load()
COST = Cost(1_000, 2_000, 252_000, Decimal("84"))


class Rate:
    """What the ceilings read of Services: the configured rate."""

    config = Config()


def caller(*holds: int) -> Caller:
    return Caller(Principal("key_1", "org_1"), "req_1", holds=[
        CreditsHeld(hold_id=f"h{n}", request_id="req_1", amount_inr_nano=amount, key_id="key_1")
        for n, amount in enumerate(holds)])


def charged(outcome: Outcome, *holds: int) -> int:
    return request_event(caller(*holds), outcome).charged_inr_nano


@pytest.mark.parametrize(("holds", "byok", "expected"), [
    ((), False, 252_000),  # held nothing (reservations off): the cost
    ((300_000,), False, 252_000),  # held more: the cost
    ((100_000, 50_000), False, 252_000),  # held less (an anomaly, gateway.billing.charging.settle): the cost
    ((300_000,), True, 0),  # the org's own key: nothing
])
def test_a_charge_is_its_true_cost_whatever_the_request_held(holds, byok, expected):
    outcome = Outcome(route="/v1/chat/completions", model="m", provider="p", status=200, cost=COST, byok=byok)
    assert charged(outcome, *holds) == expected


def test_a_transcription_ceiling_bounds_the_duration_by_the_upload_size():
    whisper = CATALOGUE.resolve("whisper-1")  # 0.006 USD a minute
    assert transcription_ceiling(Rate(), whisper, 240_000) == int(Decimal(1) * Decimal("0.006") * 84 * 10**9)


@pytest.mark.parametrize(("at", "period", "first", "reset"), [
    ("2026-11-26T23:59:59", "day", "2026-11-26", "2026-11-27T00:00:00"),
    ("2026-11-26T23:59:59", "month", "2026-11-01", "2026-12-01T00:00:00"),
    ("2026-12-31T12:00:00", "month", "2026-12-01", "2027-01-01T00:00:00"),
    ("2028-02-29T00:00:00", "month", "2028-02-01", "2028-03-01T00:00:00"),
    ("2026-11-26T10:00:00", "total", "1970-01-01", None),
])
def test_budget_periods_begin_and_reset_in_utc(at, period, first, reset):
    moment = int(datetime.fromisoformat(at).replace(tzinfo=UTC).timestamp()) * 1_000_000
    assert periods.first_day(period, moment) == (date.fromisoformat(first) - date(1970, 1, 1)).days
    expected = None if reset is None else int(datetime.fromisoformat(reset).replace(tzinfo=UTC).timestamp()) * 10**6
    assert periods.next_reset_us(period, moment) == expected


@pytest.mark.parametrize(("models", "name", "allowed"), [
    ((), "gpt-4o-mini", True),
    (("gpt-4o-mini",), "gpt-4o-mini", True),
    (("openai/gpt-4o-mini",), "gpt-4o-mini", True),
    (("openai/*",), "gpt-4o", True),
    (("anthropic/*", "gpt-4o"), "gpt-4o-mini", False),
    (("groq/*",), "gpt-oss-120b", True),
    (("groq/*",), "openrouter/gpt-oss-120b", False),
])
def test_an_allow_list_names_models_by_id_pinned_id_or_provider(models, name, allowed):
    assert allows(SpendLimits(models=models), CATALOGUE.candidates(name)[0]) is allowed
