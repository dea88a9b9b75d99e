"""POST /model/{modelId}/invoke: InvokeModel for the embedding models Bedrock serves.

* Amazon Titan Text Embeddings V2 (a model id containing ``amazon.titan-embed-text-v2``):
  ``{"inputText", "dimensions": 256 | 512 | 1024 (default 1024), "normalize", "embeddingTypes"}``
  -> ``{"embedding", "embeddingsByType": {"float"}, "inputTextTokenCount"}``.
* Cohere Embed v3 (``cohere.embed-english-v3``, ``cohere.embed-multilingual-v3``):
  ``{"texts", "input_type", "truncate", "embedding_types"}`` -> ``{"id", "embeddings": [[...]],
  "texts", "response_type": "embeddings_floats"}``, 1024 dimensions; with ``embedding_types``
  ``"embeddings"`` is an object by type (float, int8) and response_type "embeddings_by_type".

Every answer carries ``X-Amzn-Bedrock-Input-Token-Count`` (Cohere's body has no usage: the
header is the only place its tokens are told) and ``X-Amzn-Bedrock-Output-Token-Count: 0``.
Vectors are `simulator.openai_embeddings.vector` (deterministic, unit length, seeded from the
text); tokens its word count. Other model ids: 400 ValidationException. Directives in the
texts: status, aws_error, latency_ms, hang, drop_after, and the hostile usage (in the header)
and malformed (the vectors a string).
"""

import time
import uuid
from typing import Annotated, Any, Literal

import msgspec
from aiohttp import web

from simulator import bedrock_wire as wire
from simulator import directives as directive_grammar
from simulator.behaviour import abandoned, delay_headers
from simulator.connection import drop_connection
from simulator.hostile import FAULTY_COUNTS, MALFORMED
from simulator.openai_embeddings import tokens_of, vector
from simulator.openai_media import AnswerDirectives, media_plan
from simulator.recording import RECORD_KEY
from simulator.settings import SETTINGS_KEY

TITAN_V2 = "amazon.titan-embed-text-v2"
COHERE_V3 = ("cohere.embed-english-v3", "cohere.embed-multilingual-v3")
COHERE_DIMENSIONS = 1024


class InvokeDirectives(AnswerDirectives, frozen=True, forbid_unknown_fields=True):
    """The directives of the embeddings answers, plus aws_error (an AWS error by name)."""

    aws_error: str | None = None


NO_DIRECTIVES = InvokeDirectives()


class TitanRequest(msgspec.Struct, forbid_unknown_fields=True):
    inputText: Annotated[str, msgspec.Meta(min_length=1, max_length=50_000)]
    dimensions: Literal[256, 512, 1024] = 1024
    normalize: bool = True
    embeddingTypes: list[Literal["float", "binary"]] | None = None


class CohereRequest(msgspec.Struct, forbid_unknown_fields=True):
    texts: Annotated[list[Annotated[str, msgspec.Meta(min_length=1)]], msgspec.Meta(min_length=1, max_length=96)]
    input_type: Literal["search_document", "search_query", "classification", "clustering", "image"]
    truncate: Literal["NONE", "START", "END"] | None = None
    embedding_types: list[Literal["float", "int8", "uint8", "binary", "ubinary"]] | None = None


def family(model_id: str) -> Literal["titan", "cohere"] | None:
    """Which embedding model a model id (plain, regional profile or ARN) names."""
    if TITAN_V2 in model_id:
        return "titan"
    return "cohere" if any(name in model_id for name in COHERE_V3) else None


def convert(body: Any, schema: type[msgspec.Struct]) -> Any:
    """`body` as `schema`; BadRequest (400 ValidationException) otherwise."""
    try:
        return msgspec.convert(body, schema)
    except msgspec.ValidationError as exc:
        raise wire.BadRequest(f"Malformed input request: {exc}, please reformat your input and try again.") from exc


def read_directives(texts: list[str]) -> InvokeDirectives:
    try:
        found = directive_grammar.parse_as(texts, NO_DIRECTIVES)
    except directive_grammar.DirectiveError as exc:
        raise wire.BadRequest(str(exc)) from exc
    if found.aws_error is not None and found.aws_error not in wire.ERROR_STATUSES:
        raise wire.BadRequest(f"invalid simulator directive: unknown aws_error {found.aws_error!r}")
    return found


def titan_answer(request: TitanRequest, found: InvokeDirectives) -> tuple[dict[str, Any], int]:
    """Titan V2's body and its input tokens."""
    values = vector(request.inputText, request.dimensions)
    embedding: Any = MALFORMED if found.malformed else values
    body = {"embedding": embedding, "embeddingsByType": {"float": embedding},
            "inputTextTokenCount": tokens_of(request.inputText)}
    return body, tokens_of(request.inputText)


def cohere_answer(request: CohereRequest, found: InvokeDirectives) -> tuple[dict[str, Any], int]:
    """Cohere Embed v3's body and its input tokens (told only in the header)."""
    floats = [vector(text, COHERE_DIMENSIONS) for text in request.texts]
    embeddings: Any = floats
    response_type = "embeddings_floats"
    if request.embedding_types:
        embeddings = {kind: _quantized(floats, kind) for kind in request.embedding_types}
        response_type = "embeddings_by_type"
    body = {"id": str(uuid.uuid4()), "embeddings": MALFORMED if found.malformed else embeddings,
            "texts": request.texts, "response_type": response_type}
    return body, sum(tokens_of(text) for text in request.texts)


def _quantized(floats: list[list[float]], kind: str) -> list[list[Any]]:
    """Cohere's other forms: int8 / uint8 scale each value (unit vectors: |x| <= 1); the binary
    forms pack the signs, eight to a byte."""
    if kind == "float":
        return floats
    if kind in ("int8", "uint8"):
        offset = 128 if kind == "uint8" else 0
        return [[max(-128, min(127, round(value * 127))) + offset for value in row] for row in floats]
    bits = [[int(value > 0) for value in row] for row in floats]
    packed = [[int("".join(map(str, row[i:i + 8])), 2) for i in range(0, len(row), 8)] for row in bits]
    return packed if kind == "ubinary" else [[byte - 256 if byte > 127 else byte for byte in row] for row in packed]


def answer(model_id: str, body: Any) -> tuple[dict[str, Any], int, InvokeDirectives]:
    """The body, input tokens and directives of an InvokeModel request; raises BadRequest."""
    kind = family(model_id)
    if kind is None:
        raise wire.BadRequest(f"The provided model identifier is invalid or is not an embedding model the "
                              f"simulator serves on InvokeModel: {model_id}")
    if kind == "titan":
        titan = convert(body, TitanRequest)
        found = read_directives([titan.inputText])
        return (*titan_answer(titan, found), found)
    cohere = convert(body, CohereRequest)
    found = read_directives(cohere.texts)
    return (*cohere_answer(cohere, found), found)


def token_headers(tokens: int, found: InvokeDirectives, started: float) -> dict[str, str]:
    """The counts Bedrock adds to every InvokeModel answer (a hostile usage spoils the input one)."""
    counted = FAULTY_COUNTS.get(found.usage, tokens) if found.usage else tokens
    return {"X-Amzn-Bedrock-Input-Token-Count": str(counted), "X-Amzn-Bedrock-Output-Token-Count": "0",
            "X-Amzn-Bedrock-Invocation-Latency": str(int((time.monotonic() - started) * 1000))}


async def invoke(request: web.Request) -> web.StreamResponse:
    """Serve one InvokeModel request (the model id is checked by `simulator.bedrock_access`)."""
    started = time.monotonic()
    model_id = request.match_info["model_id"]
    try:
        body, tokens, found = answer(model_id, request[RECORD_KEY].body)
    except wire.BadRequest as exc:
        return wire.error_response(400, "ValidationException", str(exc))
    plan = media_plan(request.app[SETTINGS_KEY], found)
    if not await delay_headers(request, plan):
        return abandoned(request, "disconnected")
    if found.aws_error is not None:
        return wire.named_error(found.aws_error)
    if plan.status is not None:
        return wire.status_error(plan.status)
    if plan.drop_after is not None:
        drop_connection(request)
        return abandoned(request, "dropped")
    return wire.json_response(body, token_headers(tokens, found, started))
