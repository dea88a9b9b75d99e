"""A catalogue with every kind of price tier, for the tests of issue 38: the shipped catalogue
with gpt-4o-mini (openai) and claude-haiku-4-5 (anthropic) given tiers of their own."""

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec

from gateway.catalogue import SHIPPED_PATH
from gateway.config import Config
from ledger.events import RequestCompleted

MINI_PRICES = {"prompt": "0.00000015", "completion": "0.0000006", "image": "0", "audio_music_per_generation": "0",
               "input_cache_read": "0.000000075",
               "tiers": [{"above_prompt_tokens": 60, "prompt": "0.0000003", "completion": "0.0000012"}],
               "service_tiers": {"flex": {"prompt": "0.000000075", "completion": "0.0000003"},
                                 "priority": {"prompt": "0.00000025", "completion": "0.000001"}}}
HAIKU_PRICES = {"prompt": "0.000001", "completion": "0.000005", "image": "0", "audio_music_per_generation": "0",
                "input_cache_read": "0.0000001", "input_cache_write": "0.00000125", "input_cache_write_1h": "0.000002"}


def tiered_document(mini: dict | None = None, haiku: dict | None = None) -> dict:
    """The shipped catalogue with gpt-4o-mini's and claude-haiku-4-5's first entry priced as given."""
    document = json.loads(SHIPPED_PATH.read_text())
    for record in document["data"]:
        if record["id"] == "gpt-4o-mini":
            record["providers"] = [{**record["providers"][0], "pricing": mini or MINI_PRICES}]
        if record["id"] == "claude-haiku-4-5":
            record["providers"] = [{**record["providers"][0], "pricing": haiku or HAIKU_PRICES}]
    return document


def write_catalogue(path: Path, document: dict) -> Path:
    path.write_text(json.dumps(document, indent=1))
    return path


def with_catalogue(config: Config, path: Path, **catalogue: Any) -> Config:
    settings = msgspec.structs.replace(config.catalogue, path=str(path), **catalogue)
    return msgspec.structs.replace(config, catalogue=settings)


def usd_nano(tokens: dict[str, int], prices: dict[str, str]) -> int:
    """The exact cost of `tokens` (plain, cache read, five-minute and one-hour writes, completion) at
    `prices`, each part rounded once to the nano as ledger.charges does (input, output)."""
    prompt = (tokens.get("plain", 0) * Decimal(prices["prompt"])
              + tokens.get("read", 0) * Decimal(prices.get("input_cache_read", prices["prompt"]))
              + tokens.get("write", 0) * Decimal(prices.get("input_cache_write", prices["prompt"]))
              + tokens.get("write_1h", 0) * Decimal(prices.get("input_cache_write_1h", prices["prompt"])))
    output = tokens.get("completion", 0) * Decimal(prices["completion"])
    return round(prompt * 10**9) + round(output * 10**9)


async def charge_of(gateway: Any, request_id: str) -> RequestCompleted:
    """The request's RequestCompleted event."""
    found = [r.event for r in await gateway.events()
             if isinstance(r.event, RequestCompleted) and r.event.request_id == request_id]
    assert len(found) == 1, request_id
    return found[0]
