"""The error bodies, one per API shape (dialect), and where each is spoken.

Every route answers `{"error": {"message", "type", "code", "param"}}` (OpenAI's shape), except
the Anthropic Messages routes, which answer Anthropic's
`{"type": "error", "error": {"type", "message"}, "request_id"}` so its SDK raises the right
error: the `type` there is Anthropic's for the status, the gateway's own type stays in `code`.
A route declares its dialect (gateway.edge.routes.Endpoint); a request no route answers (an
unknown path, a wrong method, one that fails before routing) speaks its path's: Anthropic's
under `/v1/messages`, where its SDK is pointed, so the route table checks that its Anthropic
routes live there and no other route does.
"""

import enum
from types import MappingProxyType
from typing import Literal

import msgspec
from aiohttp import web

from gateway.edge import upstream_headers
from gateway.jsonio import encode

ANTHROPIC_ROOT = "/v1/messages"  # Anthropic's API: this path and everything under it
# Anthropic's error type for each status (its API reference, "HTTP errors"; 504 and 503 as its
# SDK's GatewayTimeout and Overloaded error objects); other 4xx are invalid_request_error, other 5xx api_error.
ANTHROPIC_TYPES = MappingProxyType({
    400: "invalid_request_error", 401: "authentication_error", 402: "billing_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
    503: "overloaded_error", 504: "timeout_error", 529: "overloaded_error"})
OVERLOADED = 529  # Anthropic's "overloaded": passed through, its SDKs retry it (as the openai SDK does any 5xx)


class Dialect(enum.Enum):
    """The shape of a route's error bodies: the API whose SDK calls it."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"


def speaks_anthropic(path: str) -> bool:
    """Whether `path` is Anthropic's (its routes declare so, and a request there no route answers
    is answered so)."""
    return path == ANTHROPIC_ROOT or path.startswith(ANTHROPIC_ROOT + "/")


def dialect_of(path: str) -> Dialect:
    """The dialect a request to `path` hears when no route's own declaration answers."""
    return Dialect.ANTHROPIC if speaks_anthropic(path) else Dialect.OPENAI


def anthropic_type(status: int) -> str:
    if status in ANTHROPIC_TYPES:
        return ANTHROPIC_TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


class ErrorDetail(msgspec.Struct):
    """What went wrong; upstream failures add the spec's gateway-error fields beside these."""

    message: str
    type: str
    code: str | None
    param: str | None


class ErrorBody(msgspec.Struct):
    """The one error body of every route (its schema is in the OpenAPI document)."""

    error: ErrorDetail


class AnthropicErrorDetail(msgspec.Struct):
    """Anthropic's error object; the gateway's `code` (and, where set, `param`, `usedProvider`,
    `requestedModel`) ride beside `type` and `message`."""

    type: str
    message: str
    code: str | None


class AnthropicErrorBody(msgspec.Struct):
    """The error body of the Anthropic Messages routes (see `speaks_anthropic`)."""

    type: Literal["error"]
    error: AnthropicErrorDetail
    request_id: str


class ApiError(Exception):
    """An error answered to the client as JSON with the given status."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None,
                 extra: dict | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type = status, message, type
        self.code, self.param = code or type, param
        self.extra, self.headers = extra or {}, headers or {}

    def body(self) -> dict:
        """ErrorBody as a dict (the keys of ErrorDetail, then any `extra`)."""
        return {"error": {"message": self.message, "type": self.type, "code": self.code, "param": self.param,
                          **self.extra}}

    def anthropic_body(self, request_id: str) -> dict:
        """AnthropicErrorBody as a dict: Anthropic's type for the status, the rest kept."""
        param = {"param": self.param} if self.param is not None else {}
        return {"type": "error", "error": {"type": anthropic_type(self.status), "message": self.message,
                                           "code": self.code, **param, **self.extra},
                "request_id": request_id}

    def body_in(self, dialect: Dialect, request_id: str) -> dict:
        """The body in `dialect`'s shape."""
        return self.anthropic_body(request_id) if dialect is Dialect.ANTHROPIC else self.body()

    def body_for(self, path: str, request_id: str) -> dict:
        """The body in the shape a request to `path` hears when no route answered it."""
        return self.body_in(dialect_of(path), request_id)

    def response(self, body: dict | None = None) -> web.Response:
        """This error as a JSON response: `body`, or the OpenAI-shaped `body()`."""
        return web.Response(status=self.status, body=encode(self.body() if body is None else body),
                            content_type="application/json", headers=self.headers)


def bad_request(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


def unauthorized(message: str) -> ApiError:
    return ApiError(401, message, type="authentication_error", code="invalid_api_key")


def ledger_unavailable(what: str = "this request could not be completed") -> ApiError:
    """What a client hears while the ledger's database is down. Nothing was charged, then or later:
    a record whose COMMIT went unanswered is not answered so (gateway.billing.charging.commit)."""
    return ApiError(503, f"the billing ledger is unavailable right now, so {what} and nothing was charged;"
                         " retry shortly",
                    type="service_unavailable", headers={"Retry-After": "1"})


class UpstreamError(Exception):
    """The provider failed: it answered an error status, timed out, or dropped the connection."""

    def __init__(self, status: int, message: str, retry_after: str | None = None, *, reason: str = "") -> None:
        super().__init__(message)
        # The provider's Retry-After reaches the client: read here, whoever raises, and re-rendered.
        self.status, self.message, self.retry_after = status, message, upstream_headers.retry_after(retry_after)
        self.reason = reason or str(status)  # "connection" or "timeout" when no status came back

    @property
    def fails_over(self) -> bool:
        """Whether another provider may be tried: the provider is down, slow or overloaded (a
        connection error, a timeout, 429 or 5xx), not refusing this request (other 4xx)."""
        return self.status == 429 or self.status >= 500

    def client_status(self, *, overload_passes: bool = True) -> int:
        """What the client sees: 429 stays 429, timeouts are 504, an overloaded provider 529
        (so the client's SDK retries) unless the route's table has no 529 (`overload_passes`
        False: music, spec 7), the rest 502 or the 4xx."""
        if self.status in (429, 504) or (self.status == OVERLOADED and overload_passes):
            return self.status
        if 400 <= self.status < 500 and self.status not in (401, 403, 407):
            return self.status  # the request itself was refused; the client can fix it
        return 502

    def to_api_error(self, provider: str, model: str, *, overload_passes: bool = True) -> ApiError:
        headers = {"Retry-After": self.retry_after} if self.retry_after else None
        return ApiError(self.client_status(overload_passes=overload_passes), self.message, type="gateway_error",
                        code="gateway_error", headers=headers,
                        extra={"usedProvider": provider, "requestedModel": model})
