"""Synthetic catalogue files for bench.catalogue_scale: chat models as a large deployment's file
would hold them, each priced with everything the catalogue can state (gateway.catalogue.pricing):
two provider entries (openai and anthropic), a long-context tier, flex and priority service tiers,
cache reads and writes (five-minute and one-hour), batch prices; and, `dated`, a price history
and, on every tenth model, prices that change at one shared instant in the future (so publishing
it schedules exactly two switches, as a real price change announced ahead does).
"""

import copy
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import orjson

from gateway.catalogue import SHIPPED_PATH

TEMPLATE_ID = "gpt-4o-mini"  # a shipped chat record: every field a record needs, valid as shipped
PROVIDERS = ("openai", "anthropic")
HISTORY_FROM, CURRENT_FROM = "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z"
FUTURE_EVERY = 10  # one model in this many has prices that change in the future


def price(value: Decimal) -> str:
    """A price as the file states it: a plain decimal string, never an exponent."""
    return f"{value.normalize():f}"


def token_prices(prompt: Decimal, completion: Decimal) -> dict[str, str]:
    return {"prompt": price(prompt), "completion": price(completion), "input_cache_read": price(prompt / 10),
            "input_cache_write": price(prompt * Decimal("1.25")), "input_cache_write_1h": price(prompt * 2)}


def entry_pricing(prompt: Decimal) -> dict:
    """One provider entry's prices: every kind the catalogue can state."""
    completion = prompt * 4
    return {**token_prices(prompt, completion), "image": "0", "audio_music_per_generation": "0",
            "batch_prompt": price(prompt / 2), "batch_completion": price(completion / 2),
            "tiers": [{"above_prompt_tokens": 200_000, **token_prices(prompt * 2, completion * Decimal("1.5"))}],
            "service_tiers": {"flex": token_prices(prompt / 2, completion / 2),
                              "priority": token_prices(prompt * Decimal("1.7"), completion * Decimal("1.7"))}}


def dated(pricing: dict, prompt: Decimal, future: str | None) -> dict:
    """`pricing` in force since CURRENT_FROM (or from `future` on), with the prices before it."""
    def past(start: str, end: str, factor: Decimal) -> dict:
        return {"prompt": price(prompt * factor), "completion": price(prompt * 4 * factor), "image": "0",
                "audio_music_per_generation": "0", "effective_from": start, "effective_to": end}
    history = [past(HISTORY_FROM, CURRENT_FROM, Decimal("1.5"))]
    if future is not None:
        history.append(past(CURRENT_FROM, future, Decimal("1.2")))
    return {**pricing, "effective_from": future or CURRENT_FROM, "price_history": history}


def model(template: dict, n: int, with_dates: bool, future: str) -> dict:
    """Synthetic chat model `n`, built on the shipped template record."""
    record = copy.deepcopy(template)
    prompt = Decimal(n % 97 + 1) / Decimal(10_000_000)  # distinct prices, so no two entries hash alike
    model_id = f"bench-chat-{n:05d}"
    entries = []
    for provider in PROVIDERS:
        pricing = entry_pricing(prompt)
        if with_dates:
            pricing = dated(pricing, prompt, future if n % FUTURE_EVERY == 0 else None)
        entries.append({**template["providers"][0], "providerId": provider, "modelName": f"{model_id}-{provider}",
                        "pricing": pricing})
    record.update(id=model_id, name=f"Bench chat {n}", aliases=[], description="A synthetic benchmark model.",
                  providers=entries)
    record["pricing"] |= {"prompt": price(prompt), "completion": price(prompt * 4)}
    return record


def future_instant(now: datetime | None = None) -> str:
    """The shared future instant: midnight UTC a week ahead (whole days, so reruns that day agree)."""
    day = (now or datetime.now(UTC)).date() + timedelta(days=7)
    return f"{day.isoformat()}T00:00:00Z"


def catalogue(models: int, *, shipped: bool, with_dates: bool = False) -> bytes:
    """A catalogue file: the shipped records (`shipped`) and `models` synthetic ones."""
    base = orjson.loads(SHIPPED_PATH.read_bytes())["data"]
    template = next(record for record in base if record["id"] == TEMPLATE_ID)
    future = future_instant()
    records = [model(template, n, with_dates, future) for n in range(models)]
    return orjson.dumps({"data": [*(base if shipped else []), *records]})


def revised(content: bytes) -> bytes:
    """The same file with its last model's first provider price changed: a reload's new file."""
    data = orjson.loads(content)
    pricing = data["data"][-1]["providers"][0]["pricing"]
    pricing["prompt"] = price(Decimal(pricing["prompt"]) * 2)
    return orjson.dumps(data)
