"""What the ceiling tests share: the shipped catalogue, a stand-in for Services with the real
adapters (built, never called: no request leaves), and what a provider honours in a request as
it is sent, per API, stated here apart from the gateway's code."""

from types import SimpleNamespace

import msgspec

from gateway.catalogue import Catalogue, Resolved
from gateway.config import Config
from gateway.edge.errors import ApiError
from gateway.providers import build
from gateway.providers.http import Upstream
from tests.support import cloud_provider

CATALOGUE = Catalogue.load()


def services() -> SimpleNamespace:
    """What the ceilings read of Services: the configured rate, the catalogue and every shipped
    provider's adapter, the clouds given credentials (else they serve nothing) at a closed port."""
    shipped = Config()
    providers = {name: cloud_provider(provider.protocol, "http://127.0.0.1:9")
                 for name, provider in shipped.providers.items()}
    config = msgspec.structs.replace(shipped, providers=providers)
    upstream = Upstream(session=None, observe=lambda *_: None)  # type: ignore[arg-type]  # never called
    return SimpleNamespace(config=config, catalogue=CATALOGUE, providers=build(config.providers, upstream))


def served(kind: str) -> list[Resolved]:
    """Every (model, provider) of the catalogue's models of `kind`."""
    return [resolved for record in CATALOGUE.listing(include_deactivated=True) if record.kind == kind
            for resolved in CATALOGUE.candidates(record.id)]


def read(value: object) -> int | None:
    """A count as the most lenient provider reads it: a whole number, also written as a float or
    a string ("7"); None when it cannot be read as one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    return value if isinstance(value, int) and value >= 0 else None


def each(most: int, *limits: object) -> int:
    """The most one answer may hold under a body's limit fields: whichever given one the provider
    honours; the model's own (`most`) without one, or with one it may ignore; never above it."""
    given = [read(limit) for limit in limits if limit is not None]
    counts = [count for count in given if count is not None]
    return most if not given or len(counts) < len(given) else min(max(counts), most)


def answers(value: object) -> int:
    """How many answers a count field asks for: as read, at least one."""
    return max(read(value) or 1, 1)


def prompts(prompt: object) -> int:
    """How many prompts a completions `prompt` holds: a list of texts or token arrays is many."""
    if isinstance(prompt, list) and prompt and not all(isinstance(item, int) for item in prompt):
        return len(prompt)
    return 1


def openai_chat(wire: dict, most: int) -> int:
    return each(most, wire.get("max_tokens"), wire.get("max_completion_tokens")) * answers(wire.get("n"))


def openai_completions(wire: dict, most: int) -> int:
    candidates = max(answers(wire.get("n")), answers(wire.get("best_of")))  # all best_of are generated
    return each(most, wire.get("max_tokens")) * candidates * prompts(wire.get("prompt"))


def openai_responses(wire: dict, most: int) -> int:
    return each(most, wire.get("max_output_tokens"))


def anthropic_messages(wire: dict, most: int) -> int:
    return each(most, wire.get("max_tokens"))


def converse(wire: dict, most: int) -> int:
    """Bedrock's Converse: inferenceConfig.maxTokens, one answer."""
    return each(most, (wire.get("inferenceConfig") or {}).get("maxTokens"))


def sent_or_refused(build) -> dict | None:
    """What an adapter sends (`build()`), None when it refuses the body: a 400, nothing sent."""
    try:
        return build()
    except ApiError:
        return None


def gemini(wire: dict, most: int) -> int:
    config = wire.get("generationConfig") or {}
    return each(most, config.get("maxOutputTokens")) * answers(config.get("candidateCount"))
