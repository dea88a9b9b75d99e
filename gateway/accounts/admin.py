"""Operator actions on the ledger. Each appends events; none edits a row."""

import re
from collections.abc import Callable, Collection, Sequence
from decimal import Decimal
from typing import TypeGuard, get_args

import msgspec
from msgspec import UNSET, UnsetType

from gateway.accounts import keys
from gateway.config import Config
from gateway.jsonio import number
from gateway.accounts.sealing import Sealer, SealingError
from ledger import queries
from ledger.events import (
    ApiKeyCreated, ApiKeyRevoked, BudgetPeriod, CreditsAdded, Event, KeyLimitsSet, KeySpendLimitsSet, OrgCreated,
    ProviderKeyRemoved, ProviderKeySet, Retention, RetentionChanged,
)
from ledger.export import parse_instant
from ledger.money import InvalidAmount, from_nano, parse_amount, to_nano
from ledger.recorder import Append, Recorder, Secret

RETENTION_MODES: tuple[Retention, ...] = get_args(Retention)
BUDGET_PERIODS: tuple[BudgetPeriod, ...] = get_args(BudgetPeriod)
MODEL_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*(/[A-Za-z0-9._:*-]+)?")
SHIPPED_PROVIDERS = tuple(Config().providers)  # the configured ones, unless a caller names them
# Balances are 64-bit nano-rupees (about 9.2e9 INR); one operation stays far below that.
MAX_AMOUNT_INR = Decimal(1_000_000_000)


class AdminError(Exception):
    """The action cannot be done; the message says why."""


async def create_org(recorder: Recorder, name: str, credits_inr: str = "0",
                     retention: str = "retain") -> dict:
    """A new organization with an admin key, and its opening credits if any."""
    amount, mode = _amount(credits_inr, allow_zero=True), _retention(retention)
    org_id, key, key_id = keys.new_id("org"), keys.new_key(), keys.new_id("key")
    events = [OrgCreated(name=name, retention=mode), key_created(key, key_id, admin=True)]
    if amount:
        events.append(CreditsAdded(amount_inr_nano=to_nano(amount), note="opening credits"))
    await _append(recorder, Append(org_id, events, expected_version=0))
    return {"org_id": org_id, "api_key": key, "key_id": key_id}


async def create_key(recorder: Recorder, org_id: str, name: str = "", admin: bool = False) -> dict:
    await _require_org(recorder, org_id)
    key, key_id = keys.new_key(), keys.new_id("key")
    await _append(recorder, Append(org_id, [key_created(key, key_id, admin=admin, name=name)]))
    return {"key_id": key_id, "api_key": key, "org_id": org_id}


async def revoke_key(recorder: Recorder, key_id: str) -> dict:
    key = await _require_key(recorder, key_id)
    if key.revoked_at_us is None:
        await _append(recorder, Append(key.org_id, [ApiKeyRevoked(key_id=key_id)]))
    return {"key_id": key_id, "org_id": key.org_id, "revoked": True}


async def add_credits(recorder: Recorder, org_id: str, amount_inr: str) -> dict:
    amount = _amount(amount_inr)
    await _require_org(recorder, org_id)
    await _append(recorder, Append(org_id, [CreditsAdded(amount_inr_nano=to_nano(amount))]))
    return {"org_id": org_id, "added_inr": number(from_nano(to_nano(amount))), **await balance(recorder, org_id)}


async def set_retention(recorder: Recorder, org_id: str, retention: str) -> dict:
    mode = _retention(retention)
    await _require_org(recorder, org_id)
    await _append(recorder, Append(org_id, [RetentionChanged(retention=mode)]))
    return {"org_id": org_id, "retention": retention}


class SpendChange(msgspec.Struct, frozen=True, kw_only=True):
    """What to change of a key's spend controls: a field left UNSET stays as it is, "" (or None,
    or an empty list) clears it. The CLI's options and the API's JSON both read into this."""

    budget_inr: str | UnsetType = UNSET
    budget_period: str | UnsetType = UNSET
    models: Sequence[str] | UnsetType = UNSET
    expires: str | UnsetType = UNSET


async def set_key_limits(recorder: Recorder, key_id: str, requests_per_minute: int | None = None,
                         tokens_per_minute: int | None = None, change: SpendChange | None = None,
                         known: Callable[[str], str] | None = None) -> dict:
    """A key's own rate limits per minute (0: unlimited; None: as they are), instead of the
    `[limits]` defaults, and its spend controls (`change`; see `spend_limits`)."""
    if (requests_per_minute or 0) < 0 or (tokens_per_minute or 0) < 0:
        raise AdminError("limits must be 0 (unlimited) or positive")
    key = await _require_key(recorder, key_id)
    current = next(iter(await queries.key_limits(recorder, key_id)), None)
    rpm = requests_per_minute if requests_per_minute is not None else current.requests_per_minute if current else 0
    tpm = tokens_per_minute if tokens_per_minute is not None else current.tokens_per_minute if current else 0
    events: list[Event] = []
    if requests_per_minute is not None or tokens_per_minute is not None:
        events.append(KeyLimitsSet(key_id=key_id, requests_per_minute=rpm, tokens_per_minute=tpm))
    limits: KeySpendLimitsSet | queries.SpendLimits | None = await queries.key_spend_limits(
        recorder, key.org_id, key_id)
    if change is not None:
        events.append(limits := spend_limits(key_id, limits, change, known))
    if events:
        await _append(recorder, Append(key.org_id, events))
    return {"key_id": key_id, "requests_per_minute": rpm, "tokens_per_minute": tpm, **limits_fields(limits)}


def spend_limits(key_id: str, current: KeySpendLimitsSet | queries.SpendLimits | None, change: SpendChange,
                 known: Callable[[str], str] | None = None) -> KeySpendLimitsSet:
    """The key's spend controls after `change`, whole, as the event recording them; AdminError
    naming what is wrong. `known` maps a model name to its canonical form (LookupError: unknown)."""
    budget = current.budget_inr_nano if current else None
    if change.budget_inr is not UNSET:
        budget = to_nano(_amount(change.budget_inr, allow_zero=True)) if change.budget_inr.strip() else None
    period = _period(current.budget_period if current else "total")
    if change.budget_period is not UNSET:
        period = _period(change.budget_period or "total")
    models = current.models if current else ()
    if change.models is not UNSET:
        models = tuple(_model_pattern(name.strip(), known) for name in change.models if name.strip())
    expires = current.expires_at_us if current else None
    if change.expires is not UNSET:
        expires = _instant(change.expires) if change.expires.strip() else None
    return KeySpendLimitsSet(key_id=key_id, budget_inr_nano=budget, budget_period=period,
                             models=models, expires_at_us=expires)


def limits_fields(limits: KeySpendLimitsSet | queries.SpendLimits | None) -> dict:
    """A key's spend controls (as recorded, or as projected) as the API and the CLI show them."""
    budget = limits.budget_inr_nano if limits else None
    expires = limits.expires_at_us if limits else None
    return {"budget_inr": None if budget is None else number(from_nano(budget)),
            "budget_period": limits.budget_period if limits else "total",
            "models": list(limits.models) if limits else [],
            "expires_at": None if expires is None else expires // 1_000_000}


def _period(text: str) -> BudgetPeriod:
    for period in BUDGET_PERIODS:
        if period == text:
            return period
    raise AdminError(f"budget period must be one of {', '.join(BUDGET_PERIODS)}, got {text!r}")


def _model_pattern(name: str, known: Callable[[str], str] | None) -> str:
    """A model id (as given, or the catalogue's id for it) or `provider/*`."""
    if not MODEL_PATTERN.fullmatch(name):
        raise AdminError(f"model {name!r} is neither a model id nor provider/*")
    if known is None or name.endswith("/*"):
        return name
    try:
        return known(name)
    except LookupError:
        raise AdminError(f"model {name!r} is not in the catalogue") from None


def _instant(text: str) -> int:
    """An ISO 8601 time (UTC when it names no offset) in microseconds."""
    try:
        return parse_instant(text)
    except ValueError as exc:
        raise AdminError(f"expiry {exc}") from None


async def set_provider_key(recorder: Recorder, sealer: Sealer, org_id: str, provider: str, key: str,
                           providers: Collection[str] = SHIPPED_PROVIDERS) -> dict:
    """Requests of the org to `provider` (one of the configured `providers`) then use its own key
    and are not charged to credits. The ledger records a fingerprint; the key itself is sealed
    and stored beside it."""
    _check_provider(provider, providers)
    if not key.strip():
        raise AdminError("the provider key is empty")
    await _require_org(recorder, org_id)
    try:
        fingerprint, sealed = sealer.fingerprint(key.strip()), sealer.seal(org_id, provider, key.strip())
    except SealingError as exc:
        raise AdminError(str(exc)) from None
    await _append(recorder, Append(org_id, [ProviderKeySet(provider=provider, fingerprint=fingerprint)],
                                   secrets=[Secret(provider, sealed)]))
    return {"org_id": org_id, "provider": provider, "fingerprint": fingerprint}


async def remove_provider_key(recorder: Recorder, org_id: str, provider: str,
                              providers: Collection[str] = SHIPPED_PROVIDERS) -> dict:
    _check_provider(provider, providers)
    await _require_org(recorder, org_id)
    if await queries.has_provider_key(recorder, org_id, provider):
        await _append(recorder, Append(org_id, [ProviderKeyRemoved(provider=provider)],
                                       secrets=[Secret(provider, None)]))
    return {"org_id": org_id, "provider": provider, "removed": True}


async def balance(recorder: Recorder, org_id: str) -> dict:
    """The org's balance; what running requests hold of it (`held_inr`) and escrow slices, credit
    taken ahead (`escrow_inr`); and what is left to hold (`available_inr`)."""
    async with recorder.snapshot():
        org = await _require_org(recorder, org_id)
        escrow = await queries.org_escrow(recorder, org_id)
    credits, spent, held = org.credits_inr_nano, org.spent_inr_nano, org.held_inr_nano
    return {"org_id": org_id, "balance_inr": number(from_nano(credits - spent)),
            "credits_inr": number(from_nano(credits)), "spent_inr": number(from_nano(spent)),
            "held_inr": number(from_nano(held - escrow)), "escrow_inr": number(from_nano(escrow)),
            "available_inr": number(from_nano(credits - spent - held))}


def key_created(key: str, key_id: str, *, admin: bool, name: str = "") -> ApiKeyCreated:
    return ApiKeyCreated(key_id=key_id, key_hash=keys.digest(key), prefix=keys.display_prefix(key),
                         name=name, admin=admin)


def _amount(text: str | Decimal, allow_zero: bool = False) -> Decimal:
    try:
        amount = parse_amount(text)
    except InvalidAmount as exc:
        raise AdminError(str(exc)) from None
    if amount < 0 or (amount == 0 and not allow_zero):
        raise AdminError(f"amount must be positive, got {text}")
    if amount > MAX_AMOUNT_INR:
        raise AdminError(f"amount {text} is above the limit of {MAX_AMOUNT_INR} INR per operation")
    if amount != amount.quantize(Decimal("0.000000001")):
        raise AdminError(f"amount {text} has more than 9 decimal places")
    return amount


def _retention(text: str) -> Retention:
    if not _is_retention(text):
        raise AdminError(f"retention must be one of {', '.join(RETENTION_MODES)}, got {text!r}")
    return text


def _is_retention(text: str) -> TypeGuard[Retention]:
    return text in RETENTION_MODES


def _check_provider(provider: str, providers: Collection[str]) -> None:
    if provider not in providers:
        raise AdminError(f"provider must be one of {', '.join(sorted(providers))} (the configured"
                         f" providers), got {provider!r}")


async def _require_org(recorder: Recorder, org_id: str) -> queries.Org:
    if (org := await queries.org(recorder, org_id)) is None:
        raise AdminError(f"no organization {org_id}")
    return org


async def _require_key(recorder: Recorder, key_id: str) -> queries.ApiKey:
    if (key := await queries.api_key(recorder, key_id)) is None:
        raise AdminError(f"no key {key_id}")
    return key


async def _append(recorder: Recorder, unit: Append) -> None:
    (outcome,) = await recorder.append([unit])
    if isinstance(outcome, Exception):
        raise AdminError(f"the ledger refused the change: {outcome}")
