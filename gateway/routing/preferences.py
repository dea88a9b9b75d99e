"""The request's `provider` object: OpenRouter's routing preferences, which its users already
send through the SDKs' `extra_body`. Taken off the body before it goes upstream."""

from typing import Literal

import msgspec

from gateway.edge.errors import bad_request

FIELD = "provider"


class Preferences(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """order: providers tried first, in this order; only: no other provider is tried; ignore:
    these are never tried; allow_fallbacks false: no provider outside `order` is tried (without
    `order`, only the first); sort: this request's strategy instead of the configured one."""

    order: tuple[str, ...] = ()
    only: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    allow_fallbacks: bool = True
    sort: Literal["priority", "price", "latency"] | None = None


NONE = Preferences()


def take(body: dict) -> Preferences:
    """The body's `provider` object, removed from it; 400 naming the field that is wrong."""
    value = body.pop(FIELD, None)
    if value is None:
        return NONE
    try:
        return msgspec.convert(value, Preferences)
    except msgspec.ValidationError as exc:
        raise bad_request(f"invalid provider preferences: {exc}".replace("`$", "`provider"), FIELD) from None
