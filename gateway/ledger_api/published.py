"""What the ledger routes answer: the published checkpoints (ledger.checkpoints.Checkpoint.published)
with the keys that signed them, the signing key, and an organization's export."""

import base64
from collections.abc import AsyncIterator, Mapping

from gateway.edge.errors import ApiError
from gateway.edge.parsing import WholeNumber
from gateway.services import Caller, Services
from ledger import checkpoints, export, signing

BEFORE = WholeNumber("before", 1, 2**62, None, "checkpoints recorded before this position (a page's next)")
LIMIT = WholeNumber("limit", 1, 100, 10, "how many, newest first")
EXPORT_AFTER = WholeNumber("after", 0, 2**62, 0, "events after this position")
EXPORT_LIMIT = WholeNumber("limit", 1, 2**62, None, "at most this many events (default: all)")


async def listing(services: Services, before: int | None, limit: int) -> dict:
    """The newest checkpoints (before a position), and the public keys that signed them."""
    found = await checkpoints.newest(services.recorder, before, limit)
    keys = {c.verified.key_id: c.verified.public_key for c in found if c.verified.key_id}
    if services.signer is not None:
        keys[services.signer.key_id] = services.signer.public_b64
    return {"checkpoints": [c.published() for c in found],
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
