"""What a key's spend controls allow, besides its budget (gateway.billing.reservations): the
models it may use and until when it works. A request they refuse is recorded, with its reason."""

from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from gateway.billing.charging import refused, refused_unread
from gateway.catalogue import Catalogue, Resolved
from gateway.accounts.directory import SpendLimits
from gateway.edge.errors import ApiError
from gateway.resolution import Served
from gateway.services import Caller, Services

S = TypeVar("S", bound=Served)


def allows(limits: SpendLimits, model: Resolved) -> bool:
    """Whether the key may use `model` from its provider: every model when its list is empty,
    else one listed by id, as `provider/id`, or by its provider's `provider/*`."""
    if not limits.models:
        return True
    provider = model.provider_id
    return any(name in limits.models for name in (model.model_id, f"{provider}/{model.model_id}", f"{provider}/*"))


def canonical(catalogue: Catalogue) -> Callable[[str], str]:
    """How an allow-list stores a model name: its catalogue id, as `provider/id` when pinned to a
    provider (UnknownModel, a LookupError, for a name the catalogue lacks)."""
    def named(name: str) -> str:
        resolved = catalogue.candidates(name)
        return f"{resolved[0].provider_id}/{resolved[0].model_id}" if "/" in name else resolved[0].model_id
    return named


def not_allowed(requested: str, models: Collection[str]) -> ApiError:
    return ApiError(403, f"this key may not use model {requested!r}; it may use {', '.join(sorted(models))}",
                    type="permission_denied", code="model_not_allowed", param="model")


async def permitted(services: Services, caller: Caller, path: str, requested: str,
                    candidates: Sequence[S]) -> list[S]:
    """The candidates the key may use; 403 (recorded, before any upstream call) when none."""
    limits = services.directory.spend_limits(caller.principal.key_id)
    if kept := [served for served in candidates if allows(limits, served.model)]:
        return kept
    raise await refused(services, caller, path, candidates[0].model, not_allowed(requested, limits.models))


def expired_at(services: Services, key_id: str) -> int | None:
    """When the key expired (microseconds), if it has."""
    expires = services.directory.spend_limits(key_id).expires_at_us
    return expires if expires is not None and services.recorder.clock() >= expires else None


async def refuse_expired(services: Services, caller: Caller, path: str, expired_at_us: int) -> ApiError:
    """401 for a key past its expiry, recorded in its org's log."""
    when = datetime.fromtimestamp(expired_at_us / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    error = ApiError(401, f"this API key expired at {when}", type="authentication_error", code="key_expired")
    return await refused_unread(services, caller, path, error)
