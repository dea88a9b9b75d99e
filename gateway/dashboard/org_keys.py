"""An organization's own API keys (GET/POST /v1/keys, PATCH/DELETE /v1/keys/{id}), with their
spend controls (budget, allowed models, expiry: see gateway.accounts.admin.spend_limits).

Every key of the org may list them; only keys created with the admin flag may create, change or
revoke. Changes go through the group-commit writer, so this process's directory knows a new key,
its new limits, or forgets a revoked one, before the response is sent.
"""

from decimal import Decimal
from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, UnsetType

from gateway.accounts import admin, key_policy, keys
from gateway.accounts.admin import AdminError, key_created
from gateway.edge.errors import ApiError
from gateway.jsonio import number
from gateway.services import Caller, Services
from ledger import periods, queries
from ledger.events import ApiKeyRevoked, KeySpendLimitsSet
from ledger.money import from_nano
from ledger.recorder import Append

ModelList = Annotated[list[Annotated[str, msgspec.Meta(max_length=200)]], msgspec.Meta(max_length=500)]


class LimitsChange(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """PATCH /v1/keys/{id}: a key's spend controls. A field left out stays as it is; null clears it."""

    budget_inr: Decimal | UnsetType | None = UNSET
    budget_period: Literal["day", "month", "total"] | UnsetType | None = UNSET
    models: ModelList | UnsetType | None = UNSET
    expires_at: Annotated[str, msgspec.Meta(max_length=64)] | UnsetType | None = UNSET

    def change(self) -> admin.SpendChange:
        """The same change as the CLI's options say it (gateway.accounts.admin.SpendChange)."""
        given = self.budget_inr
        budget: str | UnsetType = given if given is UNSET else "" if given is None else str(given)
        return admin.SpendChange(budget_inr=budget, budget_period=_cleared(self.budget_period),
                                 models=[] if self.models is None else self.models, expires=_cleared(self.expires_at))


def _cleared(value: str | UnsetType | None) -> str | UnsetType:
    """null (clear) as the CLI's empty value."""
    return "" if value is None else value


class NewKey(LimitsChange, frozen=True, forbid_unknown_fields=True):
    """POST /v1/keys: a name, whether it is an admin key, and (optionally) its spend controls."""

    name: Annotated[str, msgspec.Meta(max_length=100, pattern="^[^\x00]*$")] = ""  # PostgreSQL text holds no NUL
    admin: bool = False


def _seconds(at_us: int | None) -> int | None:
    return None if at_us is None else at_us // 1_000_000


def key_item(key: queries.ApiKey, limits: queries.SpendLimits | None = None, spend: queries.KeySpend | None = None,
             now_us: int = 0) -> dict:
    """A key as GET /v1/keys lists it: its spend controls with what it was charged in its budget's
    period (in total without a budget), what its running requests hold (`reserved_inr`), what its
    escrow slices hold (`escrow_inr`: taken ahead by a process, no request running on it), and when
    the period resets."""
    period = limits.budget_period if limits and limits.budget_inr_nano is not None else "total"
    reset = periods.next_reset_us(period, now_us)
    return {"id": key.key_id, "object": "api_key", "prefix": key.prefix, "name": key.name, "admin": key.admin,
            "created": _seconds(key.created_at_us), "last_used": _seconds(key.last_used_at_us),
            "revoked": _seconds(key.revoked_at_us), **admin.limits_fields(limits),
            "spent_inr": number(from_nano(spend.spent_inr_nano if spend else 0)),
            "reserved_inr": number(from_nano(spend.held_inr_nano if spend else 0)),
            "escrow_inr": number(from_nano(spend.escrow_inr_nano if spend else 0)),
            "resets_at": None if reset is None else reset // 1_000_000}


async def listing(services: Services, caller: Caller) -> dict:
    """Every key of the org, newest first, revoked ones with their revocation time."""
    recorder, now_us = services.recorder, services.recorder.clock()
    async with recorder.snapshot():
        rows = await queries.org_api_keys(recorder, caller.org_id)
        limits = {row.key_id: row for row in await queries.spend_limits(recorder, caller.org_id)}
        spend = {row.key_id: row for row in await queries.key_spend(recorder, caller.org_id, now_us)}
    return {"object": "list", "data": [key_item(row, limits.get(row.key_id), spend.get(row.key_id), now_us)
                                       for row in rows],
            "can_manage": caller.principal.admin, "current_key_id": caller.principal.key_id}


async def change_limits(services: Services, caller: Caller, key_id: str, request: LimitsChange) -> dict:
    """PATCH /v1/keys/{id}: change a key's spend controls (one ledger event); the key as listed."""
    _require_admin(caller, "change key limits")
    key = await _org_key(services, caller, key_id)
    current = await queries.key_spend_limits(services.recorder, caller.org_id, key_id)
    event = _limits_event(services, key_id, current, request)
    await services.writer.append(Append(caller.org_id, [event]))
    return await _listed(services, caller, key.key_id)


def _limits_event(services: Services, key_id: str, current: queries.SpendLimits | None,
                  request: LimitsChange) -> KeySpendLimitsSet:
    try:
        return admin.spend_limits(key_id, current, request.change(), key_policy.canonical(services.catalogue))
    except AdminError as exc:
        raise ApiError(400, str(exc), param="key_limits") from None


async def _listed(services: Services, caller: Caller, key_id: str) -> dict:
    return next(item for item in (await listing(services, caller))["data"] if item["id"] == key_id)


async def _org_key(services: Services, caller: Caller, key_id: str) -> queries.ApiKey:
    key = await queries.api_key(services.recorder, key_id)
    if key is None or key.org_id != caller.org_id:  # the same answer for another org's key as for none at all
        raise ApiError(404, f"no key {key_id} in this organization", type="not_found")
    return key


def _require_admin(caller: Caller, action: str) -> None:
    if not caller.principal.admin:
        raise ApiError(403, f"only an admin key may {action}; this key is not one",
                       type="permission_denied")


async def create(services: Services, caller: Caller, request: NewKey) -> dict:
    """A new key for the caller's org; the key itself is in this answer and nowhere else."""
    _require_admin(caller, "create keys")
    key, key_id = keys.new_key(), keys.new_id("key")
    event = key_created(key, key_id, admin=request.admin, name=request.name)
    limits = _limits_event(services, key_id, None, request)
    [recorded, *_] = await services.writer.append(Append(caller.org_id, [event, limits]))
    return {"id": key_id, "object": "api_key", "api_key": key, "prefix": event.prefix, "name": event.name,
            "admin": event.admin, "created": recorded.recorded_at_us // 1_000_000,
            **admin.limits_fields(limits)}


async def revoke(services: Services, caller: Caller, key_id: str) -> dict:
    """Revoke a key of the caller's org (idempotent); never the caller's own key."""
    _require_admin(caller, "revoke keys")
    key = await _org_key(services, caller, key_id)
    if key_id == caller.principal.key_id:
        raise ApiError(409, "a key cannot revoke itself; revoke it with another admin key",
                       type="conflict")
    if key.revoked_at_us is None:
        await services.writer.append(Append(caller.org_id, [ApiKeyRevoked(key_id=key_id)]))
    return {"id": key_id, "object": "api_key", "revoked": True}
