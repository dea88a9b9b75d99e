"""An organization's own API keys (GET/POST /v1/keys, DELETE /v1/keys/{id}).

Every key of the org may list them; only keys created with the admin flag may create or revoke.
Changes go through the group-commit writer, so this process's directory knows a new key, or
forgets a revoked one, before the response is sent.
"""

from typing import Annotated

import msgspec

from gateway import keys
from gateway.admin import key_created
from gateway.errors import ApiError
from gateway.services import Caller, Services
from ledger import queries
from ledger.events import ApiKeyRevoked
from ledger.recorder import Append



class NewKey(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """POST /v1/keys."""

    name: Annotated[str, msgspec.Meta(max_length=100, pattern="^[^\x00]*$")] = ""  # PostgreSQL text holds no NUL
    admin: bool = False


def _seconds(at_us: int | None) -> int | None:
    return None if at_us is None else at_us // 1_000_000


def key_item(key: queries.ApiKey) -> dict:
    return {"id": key.key_id, "object": "api_key", "prefix": key.prefix, "name": key.name, "admin": key.admin,
            "created": _seconds(key.created_at_us), "last_used": _seconds(key.last_used_at_us),
            "revoked": _seconds(key.revoked_at_us)}


async def listing(services: Services, caller: Caller) -> dict:
    """Every key of the org, newest first, revoked ones with their revocation time."""
    rows = await queries.org_api_keys(services.recorder, caller.org_id)
    return {"object": "list", "data": [key_item(row) for row in rows],
            "can_manage": caller.principal.admin, "current_key_id": caller.principal.key_id}


def _require_admin(caller: Caller, action: str) -> None:
    if not caller.principal.admin:
        raise ApiError(403, f"only an admin key may {action}; this key is not one",
                       type="permission_denied")


async def create(services: Services, caller: Caller, request: NewKey) -> dict:
    """A new key for the caller's org; the key itself is in this answer and nowhere else."""
    _require_admin(caller, "create keys")
    key, key_id = keys.new_key(), keys.new_id("key")
    event = key_created(key, key_id, admin=request.admin, name=request.name)
    [recorded] = await services.writer.append(Append(caller.org_id, [event]))
    return {"id": key_id, "object": "api_key", "api_key": key, "prefix": event.prefix, "name": event.name,
            "admin": event.admin, "created": recorded.recorded_at_us // 1_000_000}


async def revoke(services: Services, caller: Caller, key_id: str) -> dict:
    """Revoke a key of the caller's org (idempotent); never the caller's own key."""
    _require_admin(caller, "revoke keys")
    key = await queries.api_key(services.recorder, key_id)
    if key is None or key.org_id != caller.org_id:  # the same answer for another org's key as for none at all
        raise ApiError(404, f"no key {key_id} in this organization", type="not_found")
    if key_id == caller.principal.key_id:
        raise ApiError(409, "a key cannot revoke itself; revoke it with another admin key",
                       type="conflict")
    if key.revoked_at_us is None:
        await services.writer.append(Append(caller.org_id, [ApiKeyRevoked(key_id=key_id)]))
    return {"id": key_id, "object": "api_key", "revoked": True}
