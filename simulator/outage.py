"""A provider outage on demand: every provider request (``/v1/``, ``/v1beta/``) fails the same
way until the outage ends, so that one of two simulators can play a provider that is down.

``python -m simulator --outage 503`` (or ``hang``, or ``drop``) starts with one;
``POST /_sim/outage`` starts one at run time with ``{"status": 503, "retry_after": "2"}``,
``{"hang": true}`` (no answer until the client leaves) or ``{"drop": true}`` (the connection is
aborted unanswered), and ``{}`` ends it. ``GET /_sim/outage`` says which is on. Requests are
recorded as always (``GET /_sim/requests``): outcome error, disconnected or dropped.
"""

from typing import Annotated

import msgspec
from aiohttp import web
from aiohttp.typedefs import Handler

from simulator.behaviour import abandoned
from simulator.connection import drop_connection, wait_until_gone
from simulator.openai_wire import error_response
from simulator.recording import RECORDED_PREFIXES

CONTROL_PATH = "/_sim/outage"


class Outage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    status: Annotated[int, msgspec.Meta(ge=400, le=599)] | None = None
    retry_after: str | None = None
    hang: bool = False
    drop: bool = False

    @property
    def on(self) -> bool:
        return self.status is not None or self.hang or self.drop

    @classmethod
    def named(cls, name: str) -> "Outage":
        """`--outage`'s value: a status, "hang" or "drop" ("" for none)."""
        match name:
            case "":
                return cls()
            case "hang":
                return cls(hang=True)
            case "drop":
                return cls(drop=True)
            case _:
                return msgspec.convert({"status": int(name)}, cls)


class Switch:
    """The app's current outage, changed at run time through POST /_sim/outage."""

    def __init__(self, outage: Outage) -> None:
        self.outage = outage


SWITCH_KEY = web.AppKey("outage", Switch)


@web.middleware
async def outage_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    outage = request.app[SWITCH_KEY].outage
    if not outage.on or not request.path.startswith(RECORDED_PREFIXES):
        return await handler(request)
    if outage.hang:
        await wait_until_gone(request)
        return abandoned(request, "disconnected")
    if outage.drop:
        drop_connection(request)
        return abandoned(request, "dropped")
    headers = {"Retry-After": outage.retry_after} if outage.retry_after else None
    assert outage.status is not None
    return error_response(outage.status, f"simulated outage: {outage.status}", headers=headers)


async def set_outage(request: web.Request) -> web.Response:
    try:
        outage = msgspec.json.decode(await request.read() or b"{}", type=Outage)
    except msgspec.ValidationError as exc:
        return error_response(400, f"invalid outage: {exc}")
    request.app[SWITCH_KEY].outage = outage
    return web.json_response(msgspec.to_builtins(outage))


async def get_outage(request: web.Request) -> web.Response:
    return web.json_response(msgspec.to_builtins(request.app[SWITCH_KEY].outage))


def add_outage(app: web.Application, outage: Outage) -> None:
    app[SWITCH_KEY] = Switch(outage)
    app.router.add_post(CONTROL_PATH, set_outage)
    app.router.add_get(CONTROL_PATH, get_outage)
