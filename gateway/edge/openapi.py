"""The OpenAPI 3.1 document of every route (GET /openapi.json), built once as the app starts.

Request bodies are the msgspec types the handlers decode, as JSON Schema from
`msgspec.json.schema_components`; query parameters come from the constants their parsers read;
`model` fields list the catalogue's models of the route's kind. Every route the router holds
must have an entry in OPERATIONS: an undescribed route fails start-up, so none can be missed.
"""

from types import MappingProxyType

import msgspec
from aiohttp import web

from gateway import __version__
from gateway.audio import speech as audio
from gateway.chat import request as chat_request, completions
from gateway.messages import count_tokens, request as messages_request
from gateway.embeddings import service as embeddings
from gateway.models import listing as models_route
from gateway.audio import transcription, upload
from gateway.catalogue import Catalogue, Kind
from gateway.dashboard import org_keys, request_log, usage
from gateway.edge.parsing import LOG_ID_PATTERN, WholeNumber
from gateway.edge.errors import AnthropicErrorBody, ErrorBody, speaks_anthropic
from gateway.jsonio import encode
from gateway.music import history as music_history
from gateway.music import request as music_request
from gateway.responses import request as responses_request
from gateway.edge.state import DOCUMENT, SERVICES

REF = "#/components/schemas/{name}"
JSON = "application/json"
ANY_OBJECT = MappingProxyType({"type": "object"})
TEXT = MappingProxyType({"type": "string"})
Security = tuple[dict[str, list[str]], ...]  # OpenAPI security requirements: any one suffices
PUBLIC: Security = ()
KEY: Security = ({"bearer": []},)
ANTHROPIC_KEY: Security = ({"bearer": []}, {"x-api-key": []})


class Param(msgspec.Struct, frozen=True):
    name: str
    schema: dict | None = None  # None: any string
    description: str = ""
    required: bool = False
    where: str = "query"

    @classmethod
    def whole(cls, number: WholeNumber) -> "Param":
        return cls(number.name, number.schema(), number.description)

    def spec(self) -> dict:
        spec = {"name": self.name, "in": self.where, "schema": self.schema or dict(TEXT), "required": self.required}
        return {**spec, "description": self.description} if self.description else spec


class Operation(msgspec.Struct, frozen=True):
    """One route: what it takes and answers. `body` is the msgspec type of a JSON body; `answers`
    maps the success status to its content types (none: no body; None: 200 with JSON)."""

    summary: str
    body: type | None = None
    model_kind: Kind | None = None  # the kind of model its `model` names
    form: dict | None = None  # a multipart/form-data body's schema
    query: tuple[Param, ...] = ()
    headers: tuple[Param, ...] = ()
    answers: dict[str, tuple[str, ...]] | None = None
    security: tuple[dict, ...] = KEY


def _transcription_form() -> dict:
    fields = {"model": dict(TEXT), "language": dict(TEXT), "prompt": dict(TEXT),
              "response_format": {"enum": list(transcription.UPSTREAM_FORMATS)},
              "temperature": {"type": "number", "minimum": 0, "maximum": 1}}
    return {"type": "object", "required": [upload.FILE_FIELD, "model"],
            "properties": {upload.FILE_FIELD: {"type": "string", "contentMediaType": "application/octet-stream",
                                               "maxLength": upload.MAX_FILE_BYTES}, **fields}}


ID = Param("id", description="the id of the object")
BOOL_WORD = {"type": "string", "description": "true when one of 1, true, yes, on"}
OPERATIONS = MappingProxyType({
    ("GET", "/"): Operation("Health: every dependency checked", query=(
        Param("skip", description="checks to leave out, comma-separated"),), security=PUBLIC),
    ("GET", "/metrics"): Operation("Prometheus metrics", answers={"200": ("text/plain",)}, security=PUBLIC),
    ("GET", "/openapi.json"): Operation("This document", security=PUBLIC),
    ("GET", "/v1/models"): Operation("The catalogue", query=(
        Param("include_deactivated", BOOL_WORD), Param("exclude_deprecated", BOOL_WORD),
        Param.whole(models_route.PAGE), Param("after_id"), Param("before_id")), security=PUBLIC),
    ("GET", "/v1/models/{model_id}"): Operation("One model, by id, alias or provider/model", security=PUBLIC),
    ("POST", "/v1/completions"): Operation(
        "Legacy text completion, whole or streamed", completions.CompletionRequest, "completion",
        answers={"200": (JSON, "text/event-stream")}),
    ("POST", "/v1/messages/count_tokens"): Operation(
        "A Messages request's input tokens, counted by its provider (Anthropic models; free)",
        count_tokens.CountTokensRequest, "chat", security=ANTHROPIC_KEY),
    ("POST", "/v1/chat/completions"): Operation(
        "Chat completion, whole or streamed", chat_request.ChatRequest, "chat",
        answers={"200": (JSON, "text/event-stream")}),
    ("POST", "/v1/messages"): Operation(
        "Anthropic Messages for every chat model", messages_request.MessagesRequest, "chat",
        answers={"200": (JSON, "text/event-stream")}, security=ANTHROPIC_KEY),
    ("POST", "/v1/responses"): Operation(
        "A response (OpenAI's Responses API) for every chat model, whole or streamed",
        responses_request.ResponsesRequest, "chat", answers={"200": (JSON, "text/event-stream")}),
    ("GET", "/v1/responses/{response_id}"): Operation("A stored response"),
    ("POST", "/v1/embeddings"): Operation("Embeddings", embeddings.EmbeddingRequest, "embedding"),
    ("POST", "/v1/audio/speech"): Operation("Speech, streamed", audio.SpeechRequest, "speech",
                                            answers={"200": ("audio/mpeg",)}),
    ("POST", "/v1/audio/transcriptions"): Operation(
        "Transcription of an uploaded file", model_kind="transcription", form=_transcription_form(),
        answers={"200": (JSON, "text/plain")}),
    ("GET", "/v1/realtime"): Operation(
        "Realtime session (a WebSocket upgrade)", model_kind="realtime",
        query=(Param("model", required=True),), answers={"101": ()}),
    ("POST", "/v1/music"): Operation(
        "Music generation", music_request.MusicRequest, "music",
        headers=(Param("Idempotency-Key", {"type": "string", "maxLength": 255}, where="header"),)),
    ("GET", "/v1/music"): Operation("Music history", query=(Param.whole(music_history.LIMIT),)),
    ("GET", "/v1/music/{track_id}/content"): Operation("A track's audio (a redirect to a signed link)",
                                                       answers={"302": ()}),
    ("GET", "/v1/music/{track_id}/link"): Operation("A track's signed download link"),
    ("GET", "/v1/usage"): Operation("Balance, spend and errors", query=(Param.whole(usage.DAYS),)),
    ("GET", "/v1/logs"): Operation("The request log, newest first", query=(
        Param.whole(request_log.LIMIT),
        Param("before", {"type": "string", "pattern": LOG_ID_PATTERN}, "a page's next_cursor"),
        Param("route"), Param("model"), Param.whole(request_log.STATUS))),
    ("GET", "/v1/logs/{log_id}"): Operation("One request of the log: the provider that answered, every attempt,"
                                            " and its text if kept"),
    ("GET", "/v1/keys"): Operation("The organization's API keys"),
    ("POST", "/v1/keys"): Operation("A new API key (admin keys only)", org_keys.NewKey, answers={"201": (JSON,)}),
    ("DELETE", "/v1/keys/{key_id}"): Operation("Revoke an API key (admin keys only)"),
    ("PATCH", "/v1/keys/{key_id}"): Operation("Change a key's spend controls (admin keys only)", org_keys.LimitsChange),
    ("GET", "/dashboard"): Operation("The dashboard page", answers={"200": ("text/html",)}, security=PUBLIC),
    ("GET", "/dashboard/"): Operation("The dashboard page", answers={"200": ("text/html",)}, security=PUBLIC),
    ("GET", "/dashboard/static/{name}"): Operation("A dashboard file", answers={"200": ("text/javascript",)},
                                                   security=PUBLIC),
    ("GET", "/media/{object_key}"): Operation(
        "Hosted audio through a signed link (ranges supported)", query=(
            Param("expires", required=True), Param("signature", required=True)),
        answers={"200": ("audio/mpeg",), "206": ("audio/mpeg",)}, security=PUBLIC),
})


async def build(app: web.Application) -> None:
    """on_startup, once the catalogue is loaded: the document, encoded once for every request."""
    app[DOCUMENT] = encode(document(app.router, app[SERVICES].catalogue))


def document(router: web.UrlDispatcher, catalogue: Catalogue) -> dict:
    """The document for every route `router` serves (HEAD aside: it mirrors GET)."""
    schemas = _schemas(catalogue)
    paths: dict[str, dict] = {}
    for method, path in routes(router):
        if (method, path) not in OPERATIONS:
            raise LookupError(f"route {method} {path} has no entry in gateway.edge.openapi.OPERATIONS")
        paths.setdefault(path, {})[method.lower()] = _operation(OPERATIONS[method, path], path, catalogue)
    return {"openapi": "3.1.0",
            "info": {"title": "Model gateway", "version": __version__},
            "paths": paths, "security": list(KEY),
            "components": {"schemas": schemas, "responses": {"Error": _error_response(),
                                                             "AnthropicError": _anthropic_error_response()},
                           "securitySchemes": dict(SECURITY_SCHEMES)}}


SECURITY_SCHEMES = MappingProxyType({
    "bearer": {"type": "http", "scheme": "bearer", "description": "an organization's API key"},
    "x-api-key": {"type": "apiKey", "in": "header", "name": "x-api-key",
                  "description": "the same key, as the Anthropic client sends it (POST /v1/messages)"},
})


def routes(router: web.UrlDispatcher) -> list[tuple[str, str]]:
    """(method, path template) of every route; `{name:regex}` written as `{name}`."""
    found = []
    for resource in router.resources():
        info = resource.get_info()
        path = info.get("formatter") or info.get("path") or ""
        found += [(route.method, path) for route in resource if route.method != "HEAD"]
    return found


def _schemas(catalogue: Catalogue) -> dict:
    bodies = [op.body for op in OPERATIONS.values() if op.body is not None]
    _, schemas = msgspec.json.schema_components([ErrorBody, AnthropicErrorBody, *bodies], ref_template=REF)
    for op in OPERATIONS.values():
        if op.body is not None and op.model_kind is not None:
            schemas[op.body.__name__]["properties"]["model"]["enum"] = catalogue.names(op.model_kind)
    return schemas


def _operation(op: Operation, path: str, catalogue: Catalogue) -> dict:
    spec = {"summary": op.summary, "security": list(op.security), "responses": _responses(op, path),
            "parameters": [*_path_params(path), *(p.spec() for p in (*op.query, *op.headers))]}
    if op.body is not None:
        schema = {"$ref": REF.format(name=op.body.__name__)}
        spec["requestBody"] = {"required": True, "content": {JSON: {"schema": schema}}}
    if op.form is not None:
        properties = dict(op.form["properties"])
        if op.model_kind is not None:
            properties["model"] = {"enum": catalogue.names(op.model_kind)}
        form = {**op.form, "properties": properties}
        spec["requestBody"] = {"required": True, "content": {"multipart/form-data": {"schema": form}}}
    for param in spec["parameters"]:
        if param["name"] == "model" and op.model_kind is not None:
            param["schema"] = {"enum": catalogue.names(op.model_kind)}
    return spec


def _path_params(path: str) -> list[dict]:
    names = [part[1:-1] for part in path.split("/") if part.startswith("{") and part.endswith("}")]
    return [Param(name, where="path", required=True).spec() for name in names]


def _responses(op: Operation, path: str) -> dict:
    answers = {status: {"description": "success", **({"content": {kind: {"schema": _success_schema(kind)}
                                                                   for kind in kinds}} if kinds else {})}
               for status, kinds in (op.answers or {"200": (JSON,)}).items()}
    error = {"$ref": "#/components/responses/" + ("AnthropicError" if speaks_anthropic(path) else "Error")}
    return {**answers, "4XX": error, "5XX": error}


def _success_schema(content_type: str) -> dict:
    return dict(ANY_OBJECT) if content_type == JSON else {"type": "string"}


def _error_response() -> dict:
    return {"description": "the error body of every route but Anthropic's Messages routes",
            "content": {JSON: {"schema": {"$ref": REF.format(name="ErrorBody")}}}}


def _anthropic_error_response() -> dict:
    return {"description": "the error body of Anthropic's Messages routes (/v1/messages and under it)",
            "content": {JSON: {"schema": {"$ref": REF.format(name="AnthropicErrorBody")}}}}
