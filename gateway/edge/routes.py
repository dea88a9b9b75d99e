"""The route table: every endpoint declared once, with everything the edge needs to serve it.

An API family declares its endpoints beside its handlers (its `routes.py`, a tuple `ENDPOINTS`);
gateway.routes lists every family's. The app registers them through a `RouteTable`, which the
middleware reads (public or keyed, paid, error dialect), as do the OpenAPI document
(gateway.edge.openapi) and the "did you mean" 404 (gateway.edge.route_index). This package
imports no API family: the families import it.
"""

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any, Generic, Protocol, TypeVar

import msgspec
from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.catalogue import Kind
from gateway.edge.errors import Dialect, dialect_of
from gateway.edge.parsing import WholeNumber

T = TypeVar("T")
# The API's paths. A request under it shows its key before it learns whether its route exists,
# so a stranger cannot map the API; a path outside it is the dashboard's, the media's or ops'.
KEYED_PREFIX = "/v1/"
ExpectHandler = Callable[[web.Request], Awaitable[web.StreamResponse | None]]


class Param(msgspec.Struct, frozen=True):
    """A query or header parameter, as the OpenAPI document describes it."""

    name: str
    schema: dict | None = None  # None: any string
    description: str = ""
    required: bool = False
    where: str = "query"

    @classmethod
    def whole(cls, number: WholeNumber, required: bool = False) -> "Param":
        return cls(number.name, number.schema(), number.description, required)

    def spec(self) -> dict:
        spec = {"name": self.name, "in": self.where, "schema": self.schema or {"type": "string"},
                "required": self.required}
        return {**spec, "description": self.description} if self.description else spec


@dataclass(frozen=True)
class JsonBody(Generic[T]):
    """A route's JSON body: the msgspec type it decodes into, and the most bytes it may take."""

    schema: type[T]
    limit: int


@dataclass(frozen=True)
class Endpoint:
    """One route. `path` is as aiohttp routes it (`{name}` or `{name:regex}`); a GET is also
    served for HEAD. The OpenAPI facts: `summary`, the `model_kind` its `model` names, a
    multipart `form`'s schema, `query` and `headers` parameters, and `answers` (the success
    status to its content types; none: no body; None: 200 with JSON)."""

    method: str
    path: str
    handler: Handler
    summary: str
    _: KW_ONLY
    body: JsonBody[Any] | None = None
    public: bool = False  # answered without a key
    paid: bool = False  # bills the organization: one that cannot pay hears 402 before its body is read
    dialect: Dialect = Dialect.OPENAI
    key_in_subprotocol: bool = False  # a WebSocket: a browser's key may come as its subprotocol
    expect_handler: ExpectHandler | None = None
    model_kind: Kind | None = None
    kind_home: bool = False  # the route a model of `model_kind` is sent to from the others
    form: dict | None = None
    query: tuple[Param, ...] = ()
    headers: tuple[Param, ...] = ()
    answers: Mapping[str, tuple[str, ...]] | None = None

    @property
    def template(self) -> str:
        """The path with `{name:regex}` written `{name}`, as OpenAPI and the 404 name it."""
        return "/".join(_placeholder(part) for part in self.path.split("/"))

    @property
    def line(self) -> str:
        """`METHOD /template`."""
        return f"{self.method} {self.template}"


def _placeholder(part: str) -> str:
    if part.startswith("{") and part.endswith("}"):
        return "{" + part[1:-1].partition(":")[0] + "}"
    return part


class RouteFacts(Protocol):
    """What the middleware asks of a request's route: an Endpoint, or a path no endpoint answers."""

    @property
    def public(self) -> bool: ...

    @property
    def paid(self) -> bool: ...

    @property
    def dialect(self) -> Dialect: ...

    @property
    def key_in_subprotocol(self) -> bool: ...


@dataclass(frozen=True)
class PathFacts:
    """The facts of a request the router matched to no endpoint (404, 405): its path's."""

    public: bool
    dialect: Dialect
    key_in_subprotocol: bool = False
    paid: bool = False  # nothing is billed without a route


def unrouted(path: str) -> PathFacts:
    """A path's facts where no route table is known (an app of bare handlers)."""
    return PathFacts(public=not path.startswith(KEYED_PREFIX), dialect=dialect_of(path))


def largest_body(endpoints: Iterable[Endpoint]) -> int:
    """The largest JSON body any of `endpoints` takes: the app's `client_max_size`."""
    return max(endpoint.body.limit for endpoint in endpoints if endpoint.body is not None)


class RouteTable:
    """The endpoints as one app routes them: registered on its router as the table is made, each
    aiohttp route mapped to its endpoint (the middleware's one lookup per request)."""

    def __init__(self, router: web.UrlDispatcher, endpoints: Iterable[Endpoint]) -> None:
        self.endpoints = tuple(endpoints)
        _check(self.endpoints)
        self._by_route = {route: endpoint for endpoint in self.endpoints for route in _register(router, endpoint)}
        public = [e.path for e in self.endpoints if e.public and e.path.startswith(KEYED_PREFIX)]
        self._public_paths = frozenset(path for path in public if "{" not in path)
        # A public route's placeholder takes any rest of its path, so everything past its stem is public.
        self._public_stems = tuple(path.partition("{")[0] for path in public if "{" in path)
        self._subprotocol_paths = frozenset(e.path for e in self.endpoints if e.key_in_subprotocol)
        self.served = tuple(endpoint.line for endpoint in self.endpoints)

    def facts(self, request: web.Request) -> RouteFacts:
        """The endpoint the router matched; for a request it matched to none, its path's facts."""
        return self._by_route.get(request.match_info.route) or self.unrouted(request.path)

    def endpoint_of(self, route: web.AbstractRoute) -> Endpoint | None:
        return self._by_route.get(route)

    def unrouted(self, path: str) -> PathFacts:
        """What a path no endpoint answers asks: a key under KEYED_PREFIX except at a public
        route's path; the dialect spoken there; a subprotocol key where a WebSocket route is."""
        public = (not path.startswith(KEYED_PREFIX) or path in self._public_paths
                  or path.startswith(self._public_stems))
        return PathFacts(public=public, dialect=dialect_of(path), key_in_subprotocol=path in self._subprotocol_paths)

    def kind_homes(self) -> dict[Kind, str]:
        """Each model kind's home route (`METHOD /path`), named to a model asked of another route."""
        return {e.model_kind: e.line for e in self.endpoints if e.kind_home and e.model_kind is not None}


def _register(router: web.UrlDispatcher, endpoint: Endpoint) -> list[web.AbstractRoute]:
    """The aiohttp routes of `endpoint` (HEAD first, as `add_get` adds them)."""
    resource = router.add_resource(endpoint.path)
    methods = ("HEAD", "GET") if endpoint.method == "GET" else (endpoint.method,)
    return [resource.add_route(method, endpoint.handler, expect_handler=endpoint.expect_handler)
            for method in methods]


def _check(endpoints: tuple[Endpoint, ...]) -> None:
    """Refuse a table whose routes or kinds' homes repeat, or whose dialect is not their path's
    (a request there that no route answers would hear the other shape)."""
    lines = [endpoint.line for endpoint in endpoints]
    homes = [str(endpoint.model_kind) for endpoint in endpoints if endpoint.kind_home]
    for what, names in (("routes", lines), ("homes of kinds", homes)):
        if repeated := sorted({name for name in names if names.count(name) > 1}):
            raise ValueError(f"{what} declared twice: {repeated}")
    for endpoint in endpoints:
        if endpoint.dialect is not dialect_of(endpoint.path):
            raise ValueError(f"{endpoint.line} speaks {endpoint.dialect.value}; its path speaks"
                             f" {dialect_of(endpoint.path).value} (gateway.edge.errors)")
