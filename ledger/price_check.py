"""Price versions: the id of a published price list (a hash of its prices), and the check that a
charge's recorded prices are exactly those its version published for its tier at its time
(`gateway ledger check-export FILE --prices DIR`).
"""

import hashlib
import re
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import msgspec

from ledger import price_tiers
from ledger.events import Priced, RequestCompleted

_CANONICAL = msgspec.json.Encoder(order="sorted")


def version_of(prices: list[dict]) -> str:
    """A price list's version: the SHA-256 (hex, first 32 digits) of its canonical JSON (keys
    sorted, no spaces), so the same prices always make the same version, anywhere."""
    return hashlib.sha256(_CANONICAL.encode(prices)).hexdigest()[:32]


# A Priced field and the name GET /v1/prices/{version} gives its price (gateway.catalogue.prices).
TOKEN_PRICES = {"prompt_usd": "prompt", "completion_usd": "completion", "cache_read_usd": "input_cache_read",
                "cache_write_usd": "input_cache_write", "cache_write_1h_usd": "input_cache_write_1h"}
SLACK_US = 5_000  # a request's latency is recorded in whole milliseconds, its admission not at all


class PriceList(msgspec.Struct, frozen=True):
    """One `{version}.json`, as GET /v1/prices/{version} returns it."""

    version: str
    data: list[dict]
    intervals: list[dict] = []
    effective_from: str | None = None
    effective_to: str | None = None


class PricesDir:
    """The published price versions in a directory, each read (and its hash checked) once."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._read: dict[str, PriceList] = {}
        self.checked = 0

    def version(self, version: str) -> PriceList:
        """The price list of `version`; ValueError when it is missing or not what it says it is."""
        if version not in self._read:
            self._read[version] = self._load(version)
        return self._read[version]

    def _load(self, version: str) -> PriceList:
        path = self.directory / f"{version}.json"
        if not VERSION_NAME.fullmatch(version) or not path.is_file():
            raise ValueError(f"its price version {version!r} is not in {self.directory} (no {version}.json)")
        try:
            found = msgspec.json.decode(path.read_bytes(), type=PriceList)
        except msgspec.DecodeError as exc:
            raise ValueError(f"{path} is not a published price list: {exc}") from None
        if found.version != version or version_of(found.data) != version:
            raise ValueError(f"{path}: its prices do not hash to version {version}: they were altered")
        return found

    def misprices(self, event: RequestCompleted, recorded_at_us: int) -> str | None:
        """Why `event` was not charged at the prices its version published for its tier at its
        time (None: it was, or it records no price version: recorded before versions existed)."""
        priced = event.priced
        if priced is None or not priced.version:
            return None
        try:
            published = self.version(priced.version)
        except ValueError as exc:
            return str(exc)
        self.checked += 1
        if not _in_force(published, recorded_at_us - event.latency_ms * 1000 - SLACK_US, recorded_at_us):
            return f"it was charged at price version {priced.version}, which was not in force at its time"
        entries = [p["pricing"] for m in published.data if m.get("id") == event.model
                   for p in m.get("providers", ()) if p.get("providerId") == event.provider]
        if not entries:
            return f"price version {priced.version} has no prices for {event.model} on {event.provider}"
        problems = [_tier_problem(priced, event.prompt_tokens, pricing) for pricing in entries]
        return None if None in problems else problems[0]


VERSION_NAME = re.compile(r"[0-9a-f]{32}")


def _instant_us(text: str | None) -> int | None:
    return None if text is None else int(datetime.fromisoformat(text).timestamp() * 1_000_000)


def _in_force(published: PriceList, admitted_us: int, recorded_us: int) -> bool:
    """Whether the version was in force at some instant between admission and record."""
    spans = published.intervals or [{"effective_from": published.effective_from,
                                     "effective_to": published.effective_to}]
    for span in spans:
        start, end = _instant_us(span.get("effective_from")), _instant_us(span.get("effective_to"))
        if (start is None or start <= recorded_us) and (end is None or end > admitted_us):
            return True
    return False


def _tier_problem(priced: Priced, prompt_tokens: int, pricing: dict) -> str | None:
    """How `priced` differs from the published `pricing` of the tier it names (None: it does not)."""
    name = priced.tier or price_tiers.STANDARD
    service = pricing.get("service_tiers") or {}
    thresholds = [tier["above_prompt_tokens"] for tier in pricing.get("tiers") or ()]
    if name not in service:
        due = price_tiers.tier(prompt_tokens, "", thresholds, {}, name == price_tiers.BATCH, True)
        if due != name:
            return f"it was charged at the {name} tier, but a {prompt_tokens}-token prompt is charged at {due}"
    stated = _tier_prices(pricing, name, service)
    for field, published in _compared(priced).items():
        if Decimal(getattr(priced, field)) != Decimal(str(stated.get(published, "0"))):
            return (f"its {published} price in the {name} tier is {getattr(priced, field)}, but the version"
                    f" published {stated.get(published)}")
    return None


def _tier_prices(pricing: dict, name: str, service: dict) -> dict:
    """The prices of tier `name`, each as the standard tier's where the tier does not state it."""
    if name in service:
        return {**pricing, **service[name]}
    if name == price_tiers.BATCH and ("batch_prompt" in pricing or "batch_completion" in pricing):
        return {**pricing, "prompt": pricing.get("batch_prompt", pricing.get("prompt")),
                "completion": pricing.get("batch_completion", pricing.get("completion"))}
    if name == price_tiers.BATCH:  # none stated: every price halved
        return {**pricing, **{field: str(price_tiers.batch_default(Decimal(str(pricing[field]))))
                              for field in HALVED if pricing.get(field) is not None}}
    threshold = price_tiers.threshold_of(name)
    tier: dict = next((t for t in pricing.get("tiers") or () if t["above_prompt_tokens"] == threshold), {})
    return {**pricing, **tier}


HALVED = ("prompt", "completion", "input_cache_read", "input_cache_write", "input_cache_write_1h")


def _compared(priced: Priced) -> dict[str, str]:
    """The prices a request's kind of charge records: per minute, per generation, or per token."""
    if Decimal(priced.per_minute_usd) or Decimal(priced.seconds):
        return {"per_minute_usd": "audio_per_minute"}
    if Decimal(priced.flat_usd):
        return {"flat_usd": "audio_music_per_generation"}
    return TOKEN_PRICES
