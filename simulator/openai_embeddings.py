"""POST /v1/embeddings: deterministic vectors in OpenAI's format, as floats or base64.

Vectors: the SHA-3 SHAKE-256 stream of an input (its text, or its token ids) read as
little-endian int16 values, scaled to unit length and rounded to float32, `dimensions`
long (default: the model's size, 1536 for unknown models). Equal inputs give equal
vectors; a shorter `dimensions` draws a prefix of the same stream. Every value is an
exact float32, so the float and base64 (little-endian float32) forms agree bit for bit.

Tokens: the whitespace-separated words of each string input (simulator.textgen's count,
without its per-message overhead), or the length of each token array.
Directives (`[sim:status=503]`, latency_ms, hang, drop_after, and a hostile provider's usage
and malformed) are read from the inputs.
"""

import base64
import hashlib
import math
import struct
from types import MappingProxyType
from typing import Annotated, Any, Literal

import msgspec
from aiohttp import web

from simulator.openai_media import NO_ANSWER_DIRECTIVES, AnswerDirectives, BadRequest, bad_request, convert, \
    json_body, media_directives, media_plan, refusal
from simulator.hostile import MALFORMED, spoiled_usage
from simulator.openai_chat import simulated_error_body
from simulator.openai_wire import JsonAnswer, error_body, json_response
from simulator.recording import RECORD_KEY
from simulator.settings import SETTINGS_KEY, Settings
from simulator.textgen import PER_MESSAGE_OVERHEAD, count_prompt_tokens

EMBEDDINGS_PATH = "/v1/embeddings"
MODEL_DIMENSIONS = MappingProxyType(
    {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536})
DEFAULT_DIMENSIONS = 1536
MAX_INPUTS = 2048

Input = str | list[str | int | list[int]]


class EmbeddingRequest(msgspec.Struct):
    """The fields the simulator reads; unknown fields are accepted and ignored."""

    model: str
    input: Input
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: Annotated[int, msgspec.Meta(gt=0)] | None = None


def inputs_of(value: Input) -> list[str | list[int]]:
    """The separate inputs: one string, several strings, one token array or several."""
    if isinstance(value, str):
        items: list[Any] = [value]
    elif value and all(isinstance(item, int) for item in value):
        items = [value]
    else:
        items = list(value)
    if not items or len(items) > MAX_INPUTS:
        raise BadRequest(f"'input' must hold 1 to {MAX_INPUTS} inputs.")
    if any(isinstance(item, int) for item in items) or any(len(item) == 0 for item in items):
        raise BadRequest("'input' must be a non-empty string or array of them, or token arrays.")
    return items


def vector(item: str | list[int], dimensions: int) -> list[float]:
    """The embedding of one input (see the module docstring)."""
    seed = item.encode() if isinstance(item, str) else struct.pack(f"<{len(item)}q", *item)
    raw = struct.unpack(f"<{dimensions}h", hashlib.shake_256(seed).digest(2 * dimensions))
    norm = math.sqrt(math.fsum(value * value for value in raw)) or 1.0
    return float32s([value / norm for value in raw])


def float32s(values: list[float]) -> list[float]:
    """`values` rounded to the nearest float32 each."""
    return list(struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values)))


def encode_base64(values: list[float]) -> str:
    """OpenAI's base64 form: the little-endian float32 bytes of the vector."""
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()


def tokens_of(item: str | list[int]) -> int:
    if isinstance(item, str):
        return count_prompt_tokens([[item]]) - PER_MESSAGE_OVERHEAD
    return len(item)


def embeddings_body(request: EmbeddingRequest, items: list[str | list[int]],
                    faults: AnswerDirectives = NO_ANSWER_DIRECTIVES) -> dict[str, Any]:
    """The ``list`` object OpenAI answers with (as a hostile provider spoils it, if asked)."""
    dimensions = request.dimensions or MODEL_DIMENSIONS.get(request.model, DEFAULT_DIMENSIONS)
    encode = encode_base64 if request.encoding_format == "base64" else (lambda values: values)
    data = [{"object": "embedding", "index": index, "embedding": encode(vector(item, dimensions))}
            for index, item in enumerate(items)]
    tokens = sum(tokens_of(item) for item in items)
    usage = spoiled_usage({"prompt_tokens": tokens, "total_tokens": tokens}, faults.usage, "prompt_tokens")
    return {"object": "list", "data": MALFORMED if faults.malformed else data, "model": request.model,
            "usage": usage}


async def create_embeddings(request: web.Request) -> web.StreamResponse:
    """Serve one embeddings request according to settings and in-input directives."""
    return await answer(request, request[RECORD_KEY].body)


async def answer(request: web.Request, body: Any) -> web.StreamResponse:
    """Answer the embeddings request `body` (decoded JSON) as OpenAI does."""
    try:
        parsed, items, directives = parse(body)
    except BadRequest as exc:
        return bad_request(exc)
    refused = await refusal(request, media_plan(request.app[SETTINGS_KEY], directives))
    return refused if refused is not None else json_response(embeddings_body(parsed, items, directives))


def parse(body: Any) -> tuple[EmbeddingRequest, list[str | list[int]], AnswerDirectives]:
    """The request, its separate inputs and its directives; raises BadRequest."""
    parsed = convert(json_body(body), EmbeddingRequest)
    items = inputs_of(parsed.input)
    return parsed, items, media_directives((item for item in items if isinstance(item, str)), NO_ANSWER_DIRECTIVES)


def json_answer(settings: Settings, body: Any) -> JsonAnswer:
    """The status and JSON body that answer `body`, without the timing directives: how a batch line
    is answered."""
    try:
        parsed, items, directives = parse(body)
    except BadRequest as exc:
        return 400, error_body(400, str(exc))
    if directives.status is not None:
        return directives.status, simulated_error_body(directives.status)
    return 200, embeddings_body(parsed, items, directives)


def add_routes(app: web.Application) -> None:
    """Mount the OpenAI embeddings route."""
    app.router.add_post(EMBEDDINGS_PATH, create_embeddings)
