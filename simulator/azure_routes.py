"""Azure OpenAI: the v1 API and the deployments path, an api-key or an Entra ID token.

    POST /openai/v1/chat/completions | responses | embeddings | audio/speech | audio/transcriptions
        the body's ``model`` is the deployment; an ``api-version`` query is accepted and ignored
    POST /openai/deployments/{deployment}/chat/completions | embeddings | audio/speech
         | audio/transcriptions ?api-version=...
        ``api-version`` is required (else 404 ``{"error": {"code": "404", "message": "Resource not
        found"}}``); the deployment is the model, whatever the body's optional ``model`` says
    POST /openai/responses?api-version=...   as the v1 route, ``api-version`` required

Credentials, checked after the route's api-version: an ``api-key: <AZURE_API_KEY>`` header, or
``Authorization: Bearer <token>`` with an unexpired token from `entra_token` (on the v1 routes
the bearer may also be AZURE_API_KEY, as the plain OpenAI SDK sends it). A present but wrong
api-key header, or neither credential, is 401 in Azure's ``{"error": {"code": "401", "message"}}``.

Answers are OpenAI's (`openai_chat`, `openai_responses`, `openai_embeddings`, `openai_audio`,
their directives included; other errors in OpenAI's shape), with Azure's content-filter fields on
chat: a JSON answer carries ``prompt_filter_results`` and a ``content_filter_results`` per
choice; a stream opens with a chunk of empty ``choices`` (and empty id, model and object,
created 0) carrying ``prompt_filter_results``, and each choice chunk has ``content_filter_results``
(``{}`` on the role and finish chunks). Usage is streamed only on ``stream_options.include_usage``.
Requests are recorded (path under ``/openai/``) as every provider request is.
"""

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from simulator import entra_token, openai_audio, openai_chat, openai_embeddings, openai_responses
from simulator.auth import bearer_token
from simulator.cloud_credentials import AZURE_API_KEY
from simulator.openai_wire import ChunkEncoder
from simulator.recording import RECORD_KEY

V1 = "/openai/v1"
DEPLOYMENTS = "/openai/deployments/{deployment}"
SAFE = {"filtered": False, "severity": "safe"}
CONTENT_FILTER_RESULTS = {"hate": SAFE, "self_harm": SAFE, "sexual": SAFE, "violence": SAFE}
PROMPT_FILTER_RESULTS = [{"prompt_index": 0, "content_filter_results": {
    **CONTENT_FILTER_RESULTS, "jailbreak": {"filtered": False, "detected": False}}}]
BAD_KEY = ("Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid"
           " key for an active subscription and use a correct regional API endpoint for your resource.")
BAD_TOKEN = ("Unauthorized. Access token is missing, invalid, audience is incorrect"
             " (https://cognitiveservices.azure.com), or have expired.")

# Serves one request whose model is the given deployment (None: the body's own).
Operation = Callable[[web.Request, str | None], Awaitable[web.StreamResponse]]


def azure_error(status: int, message: str) -> web.Response:
    """Azure's error shape: ``{"error": {"code": "<status>", "message": ...}}``."""
    body = {"error": {"code": str(status), "message": message}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


def credential_error(request: web.Request, *, v1: bool) -> web.Response | None:
    """Azure's 401 unless the request carries a valid api-key or bearer token; None if it does."""
    key = request.headers.get("api-key")
    if key is not None:
        return None if key == AZURE_API_KEY else azure_error(401, BAD_KEY)
    token = bearer_token(request)
    if request.app[entra_token.ENTRA_TOKENS_KEY].valid(token) or (v1 and token == AZURE_API_KEY):
        return None
    return azure_error(401, BAD_KEY if not token else BAD_TOKEN)


class AzureChunkEncoder(ChunkEncoder):
    """OpenAI's chunks as Azure streams them: a prompt-filter chunk first, filter results per choice."""

    def role(self) -> bytes:
        opening = {"choices": [], "created": 0, "id": "", "model": "", "object": "",
                   "prompt_filter_results": PROMPT_FILTER_RESULTS}
        return b"data: " + orjson.dumps(opening) + b"\n\n" + super().role()

    def decorate(self, choice: dict[str, Any]) -> dict[str, Any]:
        filtered = CONTENT_FILTER_RESULTS if choice["delta"].get("content") else {}
        return {**choice, "content_filter_results": filtered}


def filtered_completion(response: web.StreamResponse) -> web.StreamResponse:
    """A JSON chat completion with Azure's filter results added; any other response as it is."""
    if not isinstance(response, web.Response) or response.status != 200 or not isinstance(response.body, bytes):
        return response
    body = orjson.loads(response.body)
    choices = body.get("choices")
    if isinstance(choices, list):
        body["choices"] = [{**choice, "content_filter_results": CONTENT_FILTER_RESULTS}
                           if isinstance(choice, dict) else choice for choice in choices]
    body["prompt_filter_results"] = PROMPT_FILTER_RESULTS
    return web.Response(body=orjson.dumps(body), content_type="application/json")


def with_model(body: Any, deployment: str | None) -> Any:
    """`body` with the deployment as its model (unchanged when there is none or no JSON object)."""
    return {**body, "model": deployment} if deployment and isinstance(body, dict) else body


async def chat(request: web.Request, deployment: str | None) -> web.StreamResponse:
    body = with_model(request[RECORD_KEY].body, deployment)
    return filtered_completion(await openai_chat.answer(request, body, AzureChunkEncoder))


async def responses(request: web.Request, deployment: str | None) -> web.StreamResponse:
    return await openai_responses.answer(request, with_model(request[RECORD_KEY].body, deployment))


async def embeddings(request: web.Request, deployment: str | None) -> web.StreamResponse:
    return await openai_embeddings.answer(request, with_model(request[RECORD_KEY].body, deployment))


async def speech(request: web.Request, deployment: str | None) -> web.StreamResponse:
    return await openai_audio.speak(request, with_model(request[RECORD_KEY].body, deployment))


async def transcriptions(request: web.Request, deployment: str | None) -> web.StreamResponse:
    return await openai_audio.create_transcription(request, deployment)


OPERATIONS: dict[str, Operation] = {"/chat/completions": chat, "/embeddings": embeddings,
                                    "/audio/speech": speech, "/audio/transcriptions": transcriptions}


def v1_route(operation: Operation) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The handler of `operation` on the v1 API: credentials, then the body's model."""
    async def handle(request: web.Request) -> web.StreamResponse:
        refused = credential_error(request, v1=True)
        return refused if refused is not None else await operation(request, None)
    return handle


def versioned_route(operation: Operation) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The handler of `operation` on a dated path: api-version, credentials, the deployment."""
    async def handle(request: web.Request) -> web.StreamResponse:
        if not request.query.get("api-version"):
            return azure_error(404, "Resource not found")
        refused = credential_error(request, v1=False)
        return refused if refused is not None else await operation(request, request.match_info.get("deployment"))
    return handle


def add_routes(app: web.Application) -> None:
    """Mount the v1 and deployment routes, and Entra ID's token endpoint."""
    entra_token.add_routes(app)
    for path, operation in {**OPERATIONS, "/responses": responses}.items():
        app.router.add_post(V1 + path, v1_route(operation))
    for path, operation in OPERATIONS.items():
        app.router.add_post(DEPLOYMENTS + path, versioned_route(operation))
    app.router.add_post("/openai/responses", versioned_route(responses))
