"""What the ledger routes answer: the published tree heads (ledger.checkpoints.Checkpoint.published)
with the keys that signed them, the signing key, the proofs of the log's tree (ledger.proofs), and
an organization's export."""

import base64
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import TypeVar

from gateway.edge.errors import ApiError
from gateway.edge.parsing import WholeNumber
from gateway.services import Caller, Services
import msgspec

from ledger import checkpoints, export, merkle, proofs, signing

T = TypeVar("T")
BEFORE = WholeNumber("before", 1, 2**62, None, "checkpoints recorded before this position (a page's next)")
LIMIT = WholeNumber("limit", 1, 100, 10, "how many, newest first")
EXPORT_AFTER = WholeNumber("after", 0, 2**62, 0, "events after this position")
EXPORT_LIMIT = WholeNumber("limit", 1, 2**62, None, "at most this many events (default: all)")
POSITION = WholeNumber("position", 1, 2**62, None, "the event's position in the log")
SIZE = WholeNumber("size", 1, 2**62, None, "the tree size (a tree head's tree_size)")
FROM = WholeNumber("from", 1, 2**62, None, "the older tree's size")
TO = WholeNumber("to", 1, 2**62, None, "the newer tree's size")


async def listing(services: Services, before: int | None, limit: int) -> dict:
    """The newest checkpoints (before a position), and the public keys that signed them."""
    found = await checkpoints.newest(services.recorder, before, limit)
    keys = {c.verified.key_id: c.verified.public_key for c in found if c.verified.key_id}
    heads = [c for c in found if not c.legacy]
    if services.signer is not None:
        keys[services.signer.key_id] = services.signer.public_b64
    return {"checkpoints": [c.published() for c in heads],
            "public_keys": [{"key_id": key_id, "public_key_pem": signing.public_pem(base64.b64decode(raw)),
                             "current": services.signer is not None and key_id == services.signer.key_id}
                            for key_id, raw in sorted(keys.items())],
            "next_before": found[-1].position if len(found) == limit else None}


def public_key(services: Services) -> str:
    """The key checkpoints are signed with now, PEM; 404 when the gateway signs none."""
    if services.signer is None:
        raise ApiError(404, "this gateway signs no checkpoints: no [ledger] signing_key is configured",
                       type="not_found")
    return services.signer.public_pem


def _required(value: int | None, name: str) -> int:
    if value is None:
        raise ApiError(400, f"{name} is required", param=name)
    return value


async def inclusion(services: Services, caller: Caller, query: Mapping[str, str]) -> dict:
    """The audit path of one of the caller's org's events in the tree of `size` (admin keys)."""
    require_admin(caller)
    position, size = _required(POSITION.read(query), "position"), _required(SIZE.read(query), "size")
    found = await proofs.event_at(services.recorder, position)
    if found is None or found[0] != caller.org_id:  # another org's event is as absent as none
        raise ApiError(404, f"no event of this organization at position {position}", type="not_found",
                       param="position")
    if position > size:
        raise ApiError(400, f"position {position} is not in a tree of {size} events", param="size")
    return msgspec.to_builtins(await _proved(proofs.inclusion(services.recorder, position, size, found[1])))


async def consistency(services: Services, query: Mapping[str, str]) -> dict:
    """The proof that the tree of `to` events extends the tree of `from` (anyone may ask)."""
    old, new = _required(FROM.read(query), "from"), _required(TO.read(query), "to")
    if old > new:
        raise ApiError(400, f"from ({old}) must not exceed to ({new})", param="from")
    return msgspec.to_builtins(await _proved(proofs.consistency(services.recorder, old, new)))


async def _proved(proof: Awaitable[T]) -> T:
    """A proof, or 404 for a tree larger than the log's tree has grown (a tree head names it)."""
    try:
        return await proof
    except merkle.ProofError as exc:
        raise ApiError(404, f"{exc}: ask for the size of a published tree head", type="not_found",
                       param="size") from None


def require_admin(caller: Caller) -> None:
    if not caller.principal.admin:
        raise ApiError(403, "only an admin key may export the organization's ledger; this key is not one",
                       type="permission_denied")


def window(query: Mapping[str, str]) -> export.Window:
    """?after=&limit=&from=&to= of an export; 400 naming a malformed one."""
    from_us, to_us = (_instant(query, name) for name in ("from", "to"))
    return export.Window(EXPORT_AFTER.read(query), from_us, to_us, EXPORT_LIMIT.read(query))


def _instant(query: Mapping[str, str], name: str) -> int | None:
    text = query.get(name)
    if text is None:
        return None
    try:
        return export.parse_instant(text)
    except ValueError as exc:
        raise ApiError(400, f"{name}: {exc}", param=name) from None


def events(services: Services, caller: Caller, query: Mapping[str, str]) -> AsyncIterator[bytes]:
    """The caller's org's events in the window the query asks for, a page of lines at a time."""
    require_admin(caller)
    return export.lines(services.recorder, caller.org_id, window(query))
