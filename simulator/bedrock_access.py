"""What every ``/model/`` request goes through before its operation: recording, then credentials.

The shared recorder (`simulator.recording`) records only ``/v1/`` and ``/v1beta/`` paths in its
middleware, so `guarded` records Bedrock's requests itself, the same way (the shared
``GET /_sim/requests`` lists them, path raw as sent, headers, decoded JSON body, outcome). What
only Bedrock has, how the request authenticated, is kept beside it by seq and listed at
``GET /_sim/bedrock/requests`` -> ``{"data": [{"seq", "operation", "model_id", "auth", "region",
"access_key_id", "session_token"}, ...]}`` (auth: "sigv4", "bearer" or "none"; region: the
credential scope's, None for a bearer key).

Credentials, as Bedrock takes them: ``Authorization: Bearer <key>`` (a Bedrock API key; any
non-empty key is accepted) or a SigV4 signature (`simulator.sigv4`). A refused request gets 403
with AWS's error name; the model id in the path must not be empty (400 ValidationException).
"""

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import msgspec
from aiohttp import web

from simulator import bedrock_wire as wire
from simulator import sigv4
from simulator.auth import bearer_token
from simulator.connection import client_gone
from simulator.recording import RECORD_KEY, RECORD_LIMIT, RECORDER_KEY, Outcome, decode_body

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MISSING = "Missing Authentication Token"


class BedrockAuth(msgspec.Struct, frozen=True):
    """How one request authenticated (see the module docstring)."""

    seq: int
    operation: str
    model_id: str
    auth: str
    region: str | None = None
    access_key_id: str | None = None
    session_token: bool = False


class AuthLog:
    """The BedrockAuth of recent requests by seq, at most RECORD_LIMIT (oldest forgotten)."""

    def __init__(self) -> None:
        self._entries: OrderedDict[int, BedrockAuth] = OrderedDict()

    def add(self, entry: BedrockAuth) -> None:
        self._entries[entry.seq] = entry
        while len(self._entries) > RECORD_LIMIT:
            self._entries.popitem(last=False)

    def snapshot(self) -> list[BedrockAuth]:
        return list(self._entries.values())


AUTH_LOG_KEY = web.AppKey("bedrock_auth_log", AuthLog)
MODEL_ID_KEY = web.RequestKey("bedrock_model_id", str)


def raw_url(request: web.Request) -> str:
    """The URL as the client signed it: host as sent, path and query still percent-encoded."""
    return f"{request.scheme}://{request.host}{request.raw_path}"


def authenticate(request: web.Request, body: bytes) -> tuple[str, sigv4.Verified | None]:
    """("bearer" | "sigv4", the signature's facts); raises SigV4Error when AWS would refuse."""
    authorization = request.headers.get("Authorization", "")
    if sigv4.is_sigv4(authorization):
        # http: botocore signs the body's hash whatever the scheme the client used (tests use http).
        url = "http" + raw_url(request).removeprefix(request.scheme)
        return "sigv4", sigv4.verify(request.method, url, request.headers, body)
    if bearer_token(request):
        return "bearer", None
    raise sigv4.SigV4Error("MissingAuthenticationTokenException", MISSING)


def guarded(operation: str, handler: Handler) -> Handler:
    """`handler` behind recording, a non-empty model id and Bedrock's credential check."""
    async def serve(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        record = request.app[RECORDER_KEY].add(request, decode_body(raw))
        record.path = request.raw_path.partition("?")[0]  # as sent: the model id stays encoded
        request[RECORD_KEY] = record
        model_id = request.match_info.get("model_id", "").strip()
        outcome: Outcome = "error"
        try:
            response = await _checked(request, operation, model_id, raw, handler)
            outcome = "error" if response.status >= 400 else "disconnected" if client_gone(request) else "completed"
            return response
        except asyncio.CancelledError:
            outcome = "disconnected"
            raise
        finally:
            record.settle(outcome)
    return serve


async def _checked(request: web.Request, operation: str, model_id: str, raw: bytes,
                   handler: Handler) -> web.StreamResponse:
    seq = request[RECORD_KEY].seq
    log = request.app[AUTH_LOG_KEY]
    try:
        kind, verified = authenticate(request, raw)
    except sigv4.SigV4Error as exc:
        log.add(BedrockAuth(seq, operation, model_id, "none"))
        return wire.error_response(403, exc.error_type, exc.message)
    if verified is None:
        log.add(BedrockAuth(seq, operation, model_id, kind))
    else:
        log.add(BedrockAuth(seq, operation, model_id, kind, verified.region, verified.access_key_id,
                            verified.session_token))
    if not model_id:
        return wire.error_response(400, "ValidationException", "1 validation error detected: Value at 'modelId' "
                                   "failed to satisfy constraint: Member must have length greater than or equal to 1")
    request[MODEL_ID_KEY] = model_id
    return await handler(request)


async def list_auth(request: web.Request) -> web.Response:
    """GET /_sim/bedrock/requests -> ``{"data": [BedrockAuth, ...]}`` oldest first."""
    body = msgspec.json.encode({"data": request.app[AUTH_LOG_KEY].snapshot()})
    return web.Response(body=body, content_type="application/json")


def add_access(app: web.Application) -> None:
    """The auth log and its control route."""
    app[AUTH_LOG_KEY] = AuthLog()
    app.router.add_get("/_sim/bedrock/requests", list_auth)
