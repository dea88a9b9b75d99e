"""One error body everywhere: {"error": {"message", "type", "code", "param"}}."""

import msgspec
from aiohttp import web

from gateway.jsonio import encode


class ErrorDetail(msgspec.Struct):
    """What went wrong; upstream failures add the spec's gateway-error fields beside these."""

    message: str
    type: str
    code: str | None
    param: str | None


class ErrorBody(msgspec.Struct):
    """The one error body of every route (its schema is in the OpenAPI document)."""

    error: ErrorDetail


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

    def response(self) -> web.Response:
        return web.Response(status=self.status, body=encode(self.body()),
                            content_type="application/json", headers=self.headers)


def bad_request(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


def unauthorized(message: str) -> ApiError:
    return ApiError(401, message, type="authentication_error", code="invalid_api_key")


def ledger_unavailable() -> ApiError:
    """What a client hears while the ledger's database is down. Not "nothing was charged": a
    connection lost during COMMIT leaves unknown whether the charge was written (once, if so)."""
    return ApiError(503, "the billing ledger is unavailable right now, so this request could not be"
                         " completed; retry shortly",
                    type="service_unavailable", headers={"Retry-After": "1"})


class UpstreamError(Exception):
    """The provider failed: it answered an error status, timed out, or dropped the connection."""

    def __init__(self, status: int, message: str, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after

    def client_status(self) -> int:
        """What the client sees: 429 stays 429, timeouts are 504, the rest 502 or the 4xx."""
        if self.status in (429, 504):
            return self.status
        if 400 <= self.status < 500 and self.status not in (401, 403, 407):
            return self.status  # the request itself was refused; the client can fix it
        return 502

    def to_api_error(self, provider: str, model: str) -> ApiError:
        headers = {"Retry-After": self.retry_after} if self.retry_after else None
        return ApiError(self.client_status(), self.message, type="gateway_error",
                        code="gateway_error", headers=headers,
                        extra={"usedProvider": provider, "requestedModel": model})
