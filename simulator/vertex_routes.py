"""Google Vertex AI: Gemini (generateContent, streamGenerateContent) and Claude (rawPredict,
streamRawPredict), OAuth access tokens from its token endpoint and metadata server.

    POST /v1/projects/{project}/locations/{region}/publishers/google/models/{model}:generateContent
    POST ...publishers/google/models/{model}:streamGenerateContent?alt=sse
    POST ...publishers/anthropic/models/{model}:rawPredict        (model like claude-sonnet-4-5@20250929)
    POST ...publishers/anthropic/models/{model}:streamRawPredict

In order: ``Authorization: Bearer <token>`` must hold an unexpired token issued by
`google_token` (``POST /token``) or `google_metadata`, else 401 UNAUTHENTICATED; ``{project}``
must be GOOGLE_PROJECT, else 403 PERMISSION_DENIED; an unknown publisher, model or method is 404
NOT_FOUND (all in Google's ``{"error": {"code", "message", "status"}}``). ``{region}`` is any,
``global`` included.

Gemini's bodies and answers are the Gemini API's (`gemini_chat`: its directives, ``[sim:cached=N]``
and ``[sim:thoughts=N]`` included). Claude's body is Anthropic's Messages body without ``model``
(400 if present) and with ``"anthropic_version": "vertex-2023-10-16"`` (400 if missing or other;
a dated API version ``YYYY-MM-DD`` passes too, as the anthropic SDK's AnthropicVertex now sends its own);
no ``anthropic-version`` header is needed. The answer is Anthropic's (`anthropic_messages`), its
``model`` the URL's; streamRawPredict streams Anthropic's SSE events whatever ``stream`` says, and
rawPredict answers JSON. Requests are recorded under their path (`vertex_call` reads it back).
"""

import re
from typing import Any

from aiohttp import web

from simulator import anthropic_messages, anthropic_wire, gemini_routes, google_metadata, google_token
from simulator.auth import bearer_token
from simulator.cloud_credentials import GOOGLE_PROJECT
from simulator.gemini_wire import error_response
from simulator.recording import RECORD_KEY

MODELS_ROUTE = "/v1/projects/{project}/locations/{region}/publishers/{publisher}/models/{model_action}"
ANTHROPIC_VERSION = "vertex-2023-10-16"
_DATED_VERSION = re.compile(r"^\d{4}-\d{2}-\d{2}$")
CLAUDE_ACTIONS = frozenset({"rawPredict", "streamRawPredict"})
UNAUTHENTICATED = ("Request had invalid authentication credentials. Expected OAuth 2 access token, login"
                   " cookie or other valid authentication credential. See"
                   " https://developers.google.com/identity/sign-in/web/devconsole-project.")
_PATH = re.compile(r"^/v1/projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/publishers/"
                   r"(?P<publisher>[^/]+)/models/(?P<model>[^/:]+):(?P<action>[^/]+)$")


def vertex_call(path: str) -> dict[str, str] | None:
    """project, region, publisher, model and action of a recorded Vertex path; None if not one."""
    found = _PATH.match(path)
    return found.groupdict() if found else None


def _resource(request: web.Request, model: str) -> str:
    info = request.match_info
    return (f"projects/{info['project']}/locations/{info['region']}/publishers/{info['publisher']}"
            f"/models/{model}")


def refusal(request: web.Request, model: str) -> web.Response | None:
    """Google's 401 without a valid token, 403 for another project; None when allowed."""
    if not request.app[google_token.GOOGLE_TOKENS_KEY].valid(bearer_token(request)):
        return error_response(401, UNAUTHENTICATED)
    if request.match_info["project"] != GOOGLE_PROJECT:
        return error_response(403, f"Permission 'aiplatform.endpoints.predict' denied on resource"
                                   f" '//aiplatform.googleapis.com/{_resource(request, model)}'"
                                   " (or it may not exist).")
    return None


def not_found(request: web.Request, model: str) -> web.Response:
    return error_response(404, f"Publisher Model `{_resource(request, model)}` was not found or your"
                               " project does not have access to it.")


async def models_route(request: web.Request) -> web.StreamResponse:
    """POST .../publishers/{publisher}/models/{model}:{action} -> the model's handler."""
    model, _, action = request.match_info["model_action"].partition(":")
    if (refused := refusal(request, model)) is not None:
        return refused
    publisher = request.match_info["publisher"]
    if publisher == "google" and (handler := gemini_routes.handler_for(model, action)) is not None:
        return await handler(request, model)
    if publisher == "anthropic" and action in CLAUDE_ACTIONS:
        return await claude(request, model, stream=action == "streamRawPredict")
    return not_found(request, model)


def claude_body(body: Any, model: str, *, stream: bool) -> dict[str, Any]:
    """The Messages API body a Vertex Claude `body` stands for; BadRequest as Vertex refuses it."""
    if not isinstance(body, dict):
        raise anthropic_wire.BadRequest("There was an error parsing the body of your request as JSON.")
    if "model" in body:
        raise anthropic_wire.BadRequest("model: Extra inputs are not permitted")
    version = body.get("anthropic_version")
    if version != ANTHROPIC_VERSION and not (isinstance(version, str) and _DATED_VERSION.match(version)):
        raise anthropic_wire.BadRequest(f"anthropic_version: Input should be '{ANTHROPIC_VERSION}'")
    messages = {name: value for name, value in body.items() if name != "anthropic_version"}
    return {**messages, "model": model, "stream": stream}


async def claude(request: web.Request, model: str, *, stream: bool) -> web.StreamResponse:
    """Serve one rawPredict (JSON) or streamRawPredict (SSE) call of Claude `model`."""
    try:
        body = claude_body(request[RECORD_KEY].body, model, stream=stream)
    except anthropic_wire.BadRequest as exc:
        return anthropic_wire.error_response(400, str(exc))
    return await anthropic_messages.answer(request, body)


def add_routes(app: web.Application) -> None:
    """Mount the Vertex model route, Google's token endpoint and the metadata server."""
    google_token.add_routes(app)
    google_metadata.add_routes(app)
    app.router.add_post(MODELS_ROUTE, models_route)
