"""Prices from genai-prices, the price list pydantic maintains (bundled with the package, no
network): the one place that reads it. `entry_pricing` turns its price for (our provider id,
the upstream's model name) into a provider entry's `pricing`, `record` into a whole catalogue
record, `stated` into every price a catalogue entry can state (gateway.catalogue.comparison
compares them). Upgrading the package's pin is how an operator takes new prices.

What maps to what (genai-prices states USD per million tokens; a catalogue USD per token):
input_mtok, output_mtok -> prompt, completion; cache_read_mtok -> input_cache_read;
cache_write_mtok (or cache_write_5m_mtok) -> input_cache_write; cache_write_1h_mtok ->
input_cache_write_1h (only where it states one). A TieredPrices' tier `start` is a threshold the
prompt must exceed (genai-prices prices a request at a tier once its input tokens are > start), as
`above_prompt_tokens` is, so it carries over unchanged; a tier above the model's context window
never applies and is left out. Price variants: {"processing": "batch"} -> batch_prompt and
batch_completion, {"service_tier": NAME} -> service_tiers[NAME], each only where its prices are
flat (a catalogue's batch and service tiers have no long-context tiers of their own) and only on
the provider's own models (as genai-prices applies them). Speech is priced per input character
(input_mchars), transcription per minute of audio (audio_hours / 60) or, where it is priced in
tokens, its audio tokens (input_audio_mtok) as prompt. Prices with a date are taken as in force
at the instant asked (now by default); `changes` names the later dates the source schedules.
"""

from __future__ import annotations

import decimal
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from types import MappingProxyType

from genai_prices import __version__, data_snapshot, types

from gateway.catalogue.pricing import RESERVED_TIERS, TIER_NAME
from gateway.catalogue.records import Kind
from ledger.money import format_amount

# Our provider ids -> genai-prices'. It has no Vertex AI provider of its own: its `google`
# provider prices Gemini and, at Google's global-endpoint rates, Claude on Vertex.
PROVIDERS = MappingProxyType({"openai": "openai", "anthropic": "anthropic", "google": "google", "groq": "groq",
                              "openrouter": "openrouter", "bedrock": "aws", "vertex": "google",
                              "azure": "azure"})
TOKEN_PRICES = MappingProxyType({"prompt": ("input_mtok",), "completion": ("output_mtok",),
                                 "input_cache_read": ("cache_read_mtok",),
                                 "input_cache_write": ("cache_write_mtok", "cache_write_5m_mtok"),
                                 "input_cache_write_1h": ("cache_write_1h_mtok",)})
BATCH = {"processing": "batch"}
NO_PRICE = "0"  # a catalogue's "none": cache prices fall back to the prompt's
ONE_HOUR = "input_cache_write_1h"  # stated only where the source has it: else the five-minute price applies


class SourceError(Exception):
    """genai-prices cannot price this provider's model as a catalogue states prices."""


class NotInSource(SourceError, LookupError):
    """genai-prices does not know the provider or the model; the message names them."""


class Unpriceable(SourceError, ValueError):
    """genai-prices knows the model but prices it in a unit the gateway does not bill by."""


@dataclass(frozen=True)
class Found:
    """A model as genai-prices knows it, through the provider asked for."""

    provider: types.Provider
    model: types.ModelInfo

    @property
    def own(self) -> bool:
        """The provider lists the model itself (not through a fallback provider): its variants apply."""
        return any(model is self.model for model in self.provider.models)


def find(provider_id: str, model: str) -> Found:
    """The genai-prices model our `provider_id` serves as `model`; NotInSource naming both."""
    source_id = PROVIDERS.get(provider_id)
    if source_id is None:
        raise NotInSource(f"provider {provider_id!r} has no genai-prices provider (known: {', '.join(PROVIDERS)})")
    try:
        found = data_snapshot.get_snapshot().find_provider_model(model, None, source_id, None)
    except LookupError:
        raise NotInSource(f"genai-prices {version()} does not know model {model!r} of provider"
                          f" {provider_id!r} (its {source_id!r})") from None
    return Found(*found)


def version() -> str:
    """The genai-prices release whose prices these are (the pin in pyproject.toml)."""
    return __version__


def _now(at: datetime | None) -> datetime:
    return datetime.now(UTC) if at is None else at


def kind(found: Found, at: datetime | None = None) -> Kind:
    """What the model does, from its name and how it is priced."""
    name, prices = found.model.id.lower(), found.model.get_prices(_now(at))
    if "embed" in name:
        return "embedding"
    if "realtime" in name:
        return "realtime"
    if prices.input_mchars is not None or "tts" in name:
        return "speech"
    if "whisper" in name or "transcribe" in name or prices.audio_hours is not None:
        return "transcription"
    return "chat"


# -- prices ------------------------------------------------------------------------------------

def per_token(per_million: Decimal) -> str:
    """USD per million tokens (or characters) as USD per one, exactly, without an exponent."""
    return format_amount(per_million.scaleb(-6))


def per_minute(per_hour: Decimal) -> str:
    """USD per hour as USD per minute; Unpriceable when that is not exact."""
    with decimal.localcontext() as context:
        context.traps[decimal.Inexact] = True
        try:
            return format_amount(per_hour / 60)
        except decimal.Inexact:
            raise Unpriceable(f"{per_hour} USD an hour is no exact price a minute") from None


def _first_price(prices: types.ModelPrice, keys: tuple[str, ...]) -> Decimal | types.TieredPrices | None:
    return next((value for key in keys if (value := getattr(prices, key)) is not None), None)


def _base(value: Decimal | types.TieredPrices) -> Decimal:
    return value.base if isinstance(value, types.TieredPrices) else value


def _at_threshold(value: Decimal | types.TieredPrices, threshold: int) -> Decimal:
    """The price of a prompt just over `threshold` tokens: its highest tier starting at or below it."""
    if not isinstance(value, types.TieredPrices):
        return value
    return next((tier.price for tier in reversed(value.tiers) if tier.start <= threshold), value.base)


def token_prices(prices: types.ModelPrice) -> dict[str, Decimal | types.TieredPrices]:
    """Our token price names -> genai-prices' values, for those it states."""
    found = {ours: _first_price(prices, keys) for ours, keys in TOKEN_PRICES.items()}
    return {ours: value for ours, value in found.items() if value is not None}


def _flat(stated: dict[str, Decimal | types.TieredPrices]) -> dict[str, str]:
    return {ours: per_token(_base(value)) for ours, value in stated.items()}


def _tiers(stated: dict[str, Decimal | types.TieredPrices], context: int | None) -> list[dict]:
    """Long-context tiers: one per tier start (below the context window), each stating the price of
    every tiered field for a prompt just over it."""
    tiered = {ours: value for ours, value in stated.items() if isinstance(value, types.TieredPrices)}
    starts = sorted({tier.start for value in tiered.values() for tier in value.tiers})
    return [{"above_prompt_tokens": start, **{ours: per_token(_at_threshold(value, start))
                                              for ours, value in tiered.items()}}
            for start in starts if start > 0 and (context is None or start < context)]


def _standard(found: Found, prices: types.ModelPrice, model_kind: Kind) -> dict[str, str]:
    """The standard tier's prices a provider entry states, every cache price included ("0": none),
    so that nothing falls back to the record's own prices."""
    if model_kind == "speech":
        if prices.input_mchars is None:
            raise Unpriceable(f"{found.model.id!r} is not priced per character, as the gateway bills speech")
        return {"prompt": per_token(_base(prices.input_mchars)), "completion": NO_PRICE}
    if model_kind == "transcription":
        return _transcription(found, prices)
    stated = _flat(token_prices(prices))
    if "prompt" not in stated:
        raise Unpriceable(f"{found.model.id!r} has no price per input token")
    return {ours: stated.get(ours, NO_PRICE) for ours in TOKEN_PRICES if ours in stated or ours != ONE_HOUR}


def _transcription(found: Found, prices: types.ModelPrice) -> dict[str, str]:
    if _per_hour(prices) is not None:
        return {"prompt": NO_PRICE, "completion": NO_PRICE}
    audio = prices.input_audio_mtok or prices.input_mtok
    if audio is None or isinstance(audio, types.TieredPrices):
        raise Unpriceable(f"{found.model.id!r} has no flat price per audio minute or input token")
    return {"prompt": per_token(audio), "completion": per_token(_base(prices.output_mtok or Decimal(0)))}


def _per_hour(prices: types.ModelPrice) -> Decimal | None:
    value = prices.input_audio_hours or prices.audio_hours
    return None if value is None or isinstance(value, types.TieredPrices) else value


def _variant(found: Found, at: datetime, when: dict[str, str]) -> dict[str, str] | None:
    """A variant's token prices, None where any of them is tiered (no catalogue tier can say so)."""
    stated = token_prices(found.model.get_prices(at, when))
    if any(isinstance(value, types.TieredPrices) for value in stated.values()):
        return None
    return _flat(stated)


def _variants(found: Found) -> list[dict[str, str]]:
    """The request contexts genai-prices prices differently, each once, in its order."""
    if not found.own:
        return []
    unique = {tuple(sorted(variant.when.items())): variant.when for variant in found.model.price_variants or ()}
    return list(unique.values())


def _service_tier(when: dict[str, str]) -> str | None:
    name = when.get("service_tier") if len(when) == 1 else None
    return name if name and TIER_NAME.fullmatch(name) and name not in RESERVED_TIERS else None


def _extra_tiers(found: Found, at: datetime, standard: dict[str, str]) -> dict:
    """Batch prices and service tiers, where the source states them flat."""
    extra: dict = {}
    for when in _variants(found):
        prices = _variant(found, at, when)
        if prices is None:
            continue
        if when == BATCH:
            extra |= {"batch_prompt": prices.get("prompt", standard["prompt"]),
                      "batch_completion": prices.get("completion", standard["completion"])}
        elif (name := _service_tier(when)) is not None:
            extra.setdefault("service_tiers", {})[name] = {ours: prices[ours] for ours in TOKEN_PRICES
                                                          if ours in prices}
    return extra


def stated(provider_id: str, model: str, at: datetime | None = None) -> dict:
    """Every price a catalogue states for the model, as the source has them at `at` (default: now):
    a provider entry's `pricing`, and `audio_per_minute` (a record's, for transcription)."""
    found, moment = find(provider_id, model), _now(at)
    model_kind, prices = kind(found, moment), found.model.get_prices(moment)
    standard = _standard(found, prices, model_kind)
    body: dict = {**standard, "image": NO_PRICE, "audio_music_per_generation": NO_PRICE}
    if model_kind == "transcription" and (hourly := _per_hour(prices)) is not None:
        return body | {"audio_per_minute": per_minute(hourly)}
    if model_kind in ("speech", "transcription"):
        return body
    if tiers := _tiers(token_prices(prices), found.model.context_window):
        body["tiers"] = tiers
    return body | _extra_tiers(found, moment, standard)


def entry_pricing(provider_id: str, model: str, at: datetime | None = None) -> dict:
    """A provider entry's `pricing` for `model` served by `provider_id`, from the source."""
    return {name: value for name, value in stated(provider_id, model, at).items() if name != "audio_per_minute"}


def changes(provider_id: str, model: str, at: datetime | None = None) -> list[date]:
    """The dates after `at` on which the source says the model's prices change."""
    found, today = find(provider_id, model), _now(at).astimezone(UTC).date()
    conditional = found.model.prices if isinstance(found.model.prices, list) else []
    constraints = [price.constraint for price in conditional]
    constraints += [variant.constraint for variant in (found.model.price_variants or ())] if found.own else []
    return sorted({c.start_date for c in constraints if isinstance(c, types.StartDateConstraint)
                   and c.start_date > today})


def context_length(provider_id: str, model: str) -> int | None:
    """The model's context window where the source knows it."""
    return find(provider_id, model).model.context_window


def default_id(model: str) -> str:
    """A record id for an upstream's model name: its last path segment ("openai/gpt-oss-20b" ->
    "gpt-oss-20b")."""
    return re.sub(r"^.*/", "", model) or model


# -- records -----------------------------------------------------------------------------------

# Who makes a model, from its name (checked in order); else the part before a "/" or ".".
FAMILIES = (("claude", "anthropic"), ("gemini", "google"), ("gemma", "google"), ("gpt", "openai"),
            ("whisper", "openai"), ("tts-", "openai"), ("text-embedding", "openai"), ("llama", "meta"),
            ("nova", "amazon"), ("titan", "amazon"), ("qwen", "qwen"), ("kimi", "moonshotai"),
            ("deepseek", "deepseek"), ("mistral", "mistral"))
LABELS = MappingProxyType({"openai": "OpenAI", "moonshotai": "MoonshotAI", "deepseek": "DeepSeek"})
TOKENIZERS = MappingProxyType({"openai": "o200k_base", "anthropic": "claude", "google": "gemini"})
MODERATED = frozenset({"openai", "anthropic", "azure"})  # upstreams that filter content themselves
MODALITIES: MappingProxyType[str, tuple[list[str], list[str]]] = MappingProxyType({
    "chat": (["text"], ["text"]), "embedding": (["text"], ["embeddings"]), "speech": (["text"], ["audio"]),
    "transcription": (["audio"], ["text"]), "realtime": (["text", "audio"], ["text", "audio"])})
PARAMETERS = MappingProxyType({
    "chat": ["max_tokens", "temperature", "top_p", "stop", "stream"],
    "embedding": ["input", "encoding_format", "user"], "speech": ["input", "voice", "response_format", "speed"],
    "transcription": ["file", "language", "prompt", "response_format", "temperature"],
    "realtime": ["modalities", "instructions", "voice", "temperature"]})
TOKEN_PRICED = frozenset({"chat", "completion", "embedding", "realtime"})  # need a context length


def family(provider_id: str, model: str) -> str:
    name = model.lower()
    named = next((owner for part, owner in FAMILIES if part in name), None)
    return named or (re.split(r"[/.]", name)[0] if re.search(r"[/.]", name) else provider_id)


def entry(provider_id: str, model: str, at: datetime | None = None) -> dict:
    """A provider entry for the model, its capabilities stated conservatively: what the source
    shows (images priced: vision) and streaming for the kinds that stream."""
    found, moment = find(provider_id, model), _now(at)
    model_kind, prices = kind(found, moment), found.model.get_prices(moment)
    streams = model_kind in ("chat", "realtime")
    return {"providerId": provider_id, "modelName": model, "pricing": entry_pricing(provider_id, model, moment),
            "streaming": streams, "vision": prices.input_image_mtok is not None, "documents": False,
            "cancellation": streams, "tools": False, "parallelToolCalls": False,
            "reasoning": prices.output_reasoning_mtok is not None, "stability": _stability(model)}


def _stability(model: str) -> str:
    return "preview" if "preview" in model.lower() else "stable"


def record_pricing(priced: dict) -> dict:
    """A record's own `pricing` from its first entry's: the spec's fields only (tiers, batch and
    service tiers stay on the entries, so no other entry falls back to them)."""
    pricing = {"prompt": priced["prompt"], "completion": priced["completion"], "image": NO_PRICE,
               "request": NO_PRICE, "input_cache_read": priced.get("input_cache_read", NO_PRICE),
               "input_cache_write": priced.get("input_cache_write", NO_PRICE), "web_search": NO_PRICE,
               "internal_reasoning": NO_PRICE, "video_per_second": NO_PRICE, "audio_music_per_generation": NO_PRICE}
    return pricing | ({"audio_per_minute": priced["audio_per_minute"]} if "audio_per_minute" in priced else {})


def record(provider_id: str, model: str, model_id: str | None = None, context: int | None = None,
           at: datetime | None = None) -> dict:
    """A complete catalogue record for `model` served by `provider_id` (id: `model_id`, default
    `default_id(model)`; context length: `context`, default the source's). Unpriceable when a
    token-priced model's context length is known to neither."""
    found, moment = find(provider_id, model), _now(at)
    model_kind = kind(found, moment)
    context = context if context is not None else found.model.context_window
    if context is None and model_kind in TOKEN_PRICED:
        raise Unpriceable(f"genai-prices does not know the context length of {model!r}: give it")
    owner, name = family(provider_id, model), found.model.name or found.model.id
    inputs, outputs = MODALITIES[model_kind]
    return {
        "id": model_id or default_id(model), "name": f"{LABELS.get(owner, owner.capitalize())}: {name}",
        "aliases": [], "created": 0, "description": found.model.description or f"{name}.",
        "family": owner, "kind": model_kind,
        "architecture": {"input_modalities": inputs, "output_modalities": outputs,
                         "tokenizer": TOKENIZERS.get(owner, "unknown") if model_kind in TOKEN_PRICED else "none"},
        "top_provider": {"is_moderated": provider_id in MODERATED},
        "providers": [entry(provider_id, model, moment)],
        "pricing": record_pricing(stated(provider_id, model, moment)), "context_length": context or 0,
        "per_request_limits": {}, "supported_parameters": PARAMETERS[model_kind], "json_output": False,
        "structured_outputs": False, "free": False, "deprecated_at": None, "deactivated_at": None,
        "stability": _stability(model)}
