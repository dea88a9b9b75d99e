"""POST /v1/completions: OpenAI's legacy text completions, for the catalogue's models of kind
`completion` (models of other kinds are a 400 naming their route). Billed as chat is: one
RequestCompleted per request on the usage the provider reports, failures recorded and not
charged, a stream billed by BilledRelay's rule (499 for a client that leaves)."""

from collections.abc import Callable
from typing import Annotated

import msgspec

from gateway.billing import ceilings
from gateway.billing.charging import bill
from gateway.catalogue import Resolved
from gateway.chat.service import chat_call, with_cost
from gateway.chat.streams import ChatRelay
from gateway.chat.request import Penalty, PositiveInt, StreamOptions, Unit
from gateway.providers.openai import adapter as openai
from gateway.resolution import COMPLETION
from gateway.routing import failover
from gateway.services import Caller, Services

ROUTE = "/v1/completions"


class CompletionRequest(msgspec.Struct):
    """POST /v1/completions: the fields the gateway reads or checks; the rest pass through."""

    model: str
    prompt: str | list[str | int | list[int]]  # text, texts, or token ids
    max_tokens: PositiveInt | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    n: Annotated[int, msgspec.Meta(ge=1, le=128)] | None = None
    best_of: Annotated[int, msgspec.Meta(ge=1, le=20)] | None = None
    echo: bool | None = None
    suffix: str | None = None
    logprobs: Annotated[int, msgspec.Meta(ge=0, le=5)] | None = None
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None
    top_p: Unit | None = None
    seed: int | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    user: str | None = None


def ceiling(services: Services, body: dict) -> Callable[[Resolved], int]:
    """The worst case of a completions `body` on each provider it is tried on: each of its prompts
    bounded on its own (with what else the body sends, a suffix say, counted in each), and the
    output the body allows: max_tokens in each of the candidates (`best_of`) of each prompt."""
    prompts = openai.inputs(body.get("prompt"))
    shared = ceilings.size({name: value for name, value in body.items() if name != "prompt"})
    return lambda model: ceilings.worst(
        services, model, ceilings.inputs_bound(model, prompts, shared),
        services.providers.completion[model.provider_id].completion_allowance(body), body.get("service_tier"))


def prompt_text(request: CompletionRequest) -> list[dict]:
    """The prompt as retained in the content store (and as a leaving client's estimate reads it)."""
    return [{"role": "user", "content": request.prompt}]


def choice_texts(body: dict) -> list[str]:
    """The text of each choice of a completion or of one streamed chunk."""
    return [choice.get("text") or "" for choice in body.get("choices") or ()]


async def complete(services: Services, caller: Caller, body: dict, request: CompletionRequest) -> dict:
    """A non-streamed completion from the first provider that answers, billed before it is returned."""
    answered = await failover.routed(
        services, caller, body, request.model, COMPLETION,
        lambda served, key: served.provider.complete(chat_call(caller, body, served, key)), path=ROUTE,
        ceiling=ceiling(services, body))
    reply = answered.answer
    cost = await bill(services, caller, ROUTE, answered.served.model, reply.usage,
                      {"request": prompt_text(request), "response": choice_texts(reply.body)}, byok=answered.byok,
                      answer=lambda cost: with_cost(reply, cost))
    return with_cost(reply, cost)


async def open_stream(services: Services, caller: Caller, body: dict, request: CompletionRequest
                      ) -> "CompletionRelay":
    """Start a streamed completion with the first provider that accepts it; errors before then
    are ordinary error responses."""
    answered = await failover.routed(
        services, caller, body, request.model, COMPLETION,
        lambda served, key: served.provider.open_completion_stream(chat_call(caller, body, served, key)),
        path=ROUTE, ceiling=ceiling(services, body), stream=True)
    return CompletionRelay(services, caller, request, answered.served.model, answered.answer, prompt_text(request),
                           byok=answered.byok)


class CompletionRelay(ChatRelay):
    """Chat's relay, for chunks whose choices carry `text`."""

    route = ROUTE
    chunk_object = "text_completion"

    @staticmethod
    def _texts(chunk: dict) -> list[str]:
        return choice_texts(chunk)
