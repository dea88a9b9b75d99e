"""POST /v1/embeddings (spec 2.4, 4.4): validate, call the provider once, bill the prompt tokens.

Upstream is always asked for floats; the gateway itself produces the base64 form (little-endian
float32) when the client asks for it, so both forms of a vector agree exactly.
"""

from collections.abc import Callable
from typing import Annotated, Literal

import msgspec

from gateway.providers.openai import float32
from gateway.billing import ceilings
from gateway.billing.charging import bill
from gateway.billing.pricing import Cost, cost_fields
from gateway.providers.usage import Usage
from gateway.catalogue import Resolved
from gateway.edge.errors import bad_request
from gateway.providers.base import EmbeddingCall
from gateway.providers.openai.adapter import inputs
from gateway.resolution import EMBEDDING
from gateway.routing import failover
from gateway.services import Caller, Services

ROUTE = "/v1/embeddings"
BODY_BYTES = 8 * 1024 * 1024
MAX_INPUTS = 2048  # OpenAI's limit on the inputs of one request

Input = str | list[str | int | list[int]]


class EmbeddingRequest(msgspec.Struct):
    """The fields the gateway acts on; every other field passes through to upstream."""

    model: str
    input: Input
    encoding_format: Literal["float", "base64"] | None = None  # None (litellm sends it): float
    dimensions: Annotated[int, msgspec.Meta(gt=0)] | None = None  # at most the model's (check_dimensions)


def inputs_of(value: Input) -> list[str | list[int]]:
    """The separate inputs: one text, a list of texts, one token array, or a list of them.
    400 naming `input` when it is empty, holds an empty item, or mixes the forms."""
    items = inputs(value)
    if not items or any(isinstance(item, int) or len(item) == 0 for item in items):
        raise bad_request("input must be a non-empty string, a list of non-empty strings, or token"
                          " arrays", "input")
    if len(items) > MAX_INPUTS:
        raise bad_request(f"input holds {len(items)} items; at most {MAX_INPUTS}", "input")
    return items


def ceiling(services: Services, items: list[str | list[int]]) -> Callable[[Resolved], int]:
    """The worst case of embedding `items` on each provider: every item may fill a context of
    its own (`ceilings.inputs_bound`); no output."""
    return lambda model: ceilings.tokens(services, model, ceilings.inputs_bound(model, items), 0)


def check_dimensions(model: Resolved, dimensions: int | None) -> None:
    """400 naming `dimensions` when it asks for longer vectors than the model makes."""
    most = model.max_dimensions
    if dimensions is not None and most is not None and dimensions > most:
        raise bad_request(f"dimensions must be at most {most} for model {model.model_id!r}, got {dimensions}",
                          "dimensions")


def embeddings_body(request_id: str, model: str, vectors: list[list[float]], encoding_format: str | None,
                    usage: Usage, cost: Cost) -> dict:
    """The list object of spec 2.4, each vector in the form the client asked for."""
    encode = float32.encode if encoding_format == "base64" else (lambda vector: vector)
    data = [{"object": "embedding", "embedding": encode(vector), "index": index}
            for index, vector in enumerate(vectors)]
    return {"id": request_id, "object": "list", "data": data, "model": model,
            "usage": {"prompt_tokens": usage.prompt_tokens, "total_tokens": usage.total_tokens,
                      **cost_fields(cost)}}


async def create(services: Services, caller: Caller, body: dict, request: EmbeddingRequest) -> dict:
    """One embeddings request from the first provider that answers, billed on the prompt tokens it reports."""
    items = inputs_of(request.input)
    route = await failover.plan(services, body, request.model, EMBEDDING)
    check_dimensions(route.candidates[0].model, request.dimensions)
    answered = await failover.answer(
        services, caller, route, lambda served, key: served.provider.embed(EmbeddingCall(
            caller.request_id, served.model.upstream_model, body, key)),
        path=ROUTE, model=request.model,
        ceiling=ceiling(services, items))
    model, reply = answered.served.model, answered.answer
    usage = Usage(reply.prompt_tokens)
    def answer(cost: Cost) -> dict:
        return embeddings_body(caller.request_id, model.model_id, reply.vectors, request.encoding_format, usage, cost)

    return answer(await bill(services, caller, ROUTE, model, usage, {"request": request.input}, byok=answered.byok,
                             answer=answer))
