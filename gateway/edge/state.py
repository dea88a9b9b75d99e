"""Every typed key of the gateway, in one place: what the application (`app[...]`) and each
request (`request[...]`) carry, and of what type.

Imported by the middleware, the request edge and the routes, so at run time it imports only
modules that import nothing of the routes; the types of the rest (Services, Upstream, the router)
are named for type checkers only, and an open realtime session by what a shutdown asks of it.
Keys typed that way, or by a union, are declared by annotation, which is what type checkers read;
at run time only a key's `repr` lacks its type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import msgspec
from aiohttp import web
from redis.asyncio import Redis

from gateway.edge.body_budget import BodyBudget, BodyHold
from gateway.config import Config
from gateway.accounts.directory import Directory
from gateway.ops.facts import RequestFacts
from gateway.ops.metrics import Metrics
from gateway.edge.routes import RouteFacts, RouteTable
from ledger.follower import LogFollower
from ledger.recorder import Clock, Recorder
from ledger.writer import GroupCommitWriter
from storage.objects import ObjectStore

if TYPE_CHECKING:  # these import the providers, whose modules import this one
    from gateway.providers.http import Upstream
    from gateway.routing.router import Router
    from gateway.services import Caller, Services
    from gateway.telemetry.tracing import Tracing


class Ledger(msgspec.Struct, frozen=True):
    """The ledger as one process holds it: the recorder, its writer, and the view that follows it."""

    recorder: Recorder
    writer: GroupCommitWriter
    directory: Directory
    follower: LogFollower


class OpenSession(Protocol):
    """An open realtime session (gateway.realtime.session), as a shutdown ends it."""

    async def going_away(self) -> None: ...


# -- the application's, set once as it starts (see gateway.app) --------------------------------
CONFIG = web.AppKey("config", Config)
CLOCK: web.AppKey[Clock] = web.AppKey("clock")  # the ledger's time, and so budget periods' (tests set it)
LEDGER = web.AppKey("ledger", Ledger)
UPSTREAM: web.AppKey[Upstream] = web.AppKey("upstream")
REDIS: web.AppKey[Redis | None] = web.AppKey("redis")  # None: no Redis configured
STORE: web.AppKey[ObjectStore | None] = web.AppKey("store")  # None: no object storage
ROUTER: web.AppKey[Router] = web.AppKey("router")
SERVICES: web.AppKey[Services] = web.AppKey("services")
METRICS = web.AppKey("metrics", Metrics)
TRACING: web.AppKey[Tracing | None] = web.AppKey("tracing")  # None: traces are off
BODY_BUDGET = web.AppKey("body_budget", BodyBudget)
# The realtime sessions open in this process, so a shutdown can end each one (gateway.realtime.session).
SESSIONS: web.AppKey[set[OpenSession]] = web.AppKey("realtime_sessions")
ROUTES = web.AppKey("routes", RouteTable)  # every endpoint, as the router serves them (gateway.routes)
DOCUMENT = web.AppKey("openapi_document", bytes)  # GET /openapi.json, encoded once (gateway.edge.openapi)

# -- each request's -----------------------------------------------------------------------------
REQUEST_ID = web.RequestKey("request_id", str)
# Its endpoint (or, when the router matched none, its path's facts): the middleware's questions.
ROUTE: web.RequestKey[RouteFacts] = web.RequestKey("route")
CALLER: web.RequestKey[Caller] = web.RequestKey("caller")
# What the request turned out to be (model, provider, cost, ...): its log line and metrics read it.
FACTS = web.RequestKey("facts", RequestFacts)
BODY_HOLD = web.RequestKey("body_hold", BodyHold)  # its share of the body budget
STARTED = web.RequestKey("started_response", web.StreamResponse)  # once the handler has begun its answer
