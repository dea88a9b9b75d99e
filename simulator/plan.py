"""What one request will do: settings merged with its directives, independent of wire format."""

import msgspec

from simulator.directives import Directives, MusicDirectives
from simulator.settings import Settings


class Plan(msgspec.Struct, frozen=True):
    """The resolved behaviour of one request.

    tokens: completion tokens to generate (already capped at the client's limit).
    truncated: True when the client's limit cut the completion short; each wire
        format maps it to its own stop reason ("length" for OpenAI).
    token_interval_s: pause between consecutive token chunks (0 = none).
    """

    latency_s: float
    tokens: int
    truncated: bool
    token_interval_s: float
    status: int | None = None
    hang: bool = False
    hang_after: int | None = None
    drop_after: int | None = None
    chunk_bytes: int | None = None  # the size of each streamed delta, when not a token's


def make_plan(settings: Settings, directives: Directives, limit: int | None) -> Plan:
    """Merge `directives` over `settings` and cap generation at `limit` (None = no cap)."""
    wanted = settings.completion_tokens if directives.tokens is None else directives.tokens
    tokens = wanted if limit is None or directives.overrun else min(wanted, limit)
    latency_ms = settings.latency_ms if directives.latency_ms is None else directives.latency_ms
    tps = settings.tokens_per_second if directives.tps is None else directives.tps
    return Plan(
        latency_s=latency_ms / 1000,
        tokens=tokens,
        truncated=tokens < wanted,
        token_interval_s=1 / tps if tps > 0 else 0.0,
        status=directives.status,
        hang=directives.hang,
        hang_after=directives.hang_after,
        drop_after=directives.drop_after,
        chunk_bytes=directives.chunk_bytes,
    )


def make_music_plan(settings: Settings, directives: MusicDirectives) -> Plan:
    """The Plan of an answer sent as one piece (no tokens): latency, hang, status and drop."""
    latency_ms = settings.latency_ms if directives.latency_ms is None else directives.latency_ms
    return Plan(
        latency_s=latency_ms / 1000,
        tokens=0,
        truncated=False,
        token_interval_s=0.0,
        status=directives.status,
        hang=directives.hang,
        drop_after=directives.drop_after,
    )


def generation_time(plan: Plan) -> float:
    """Seconds a completion takes to generate: the pauses between its token chunks."""
    return max(plan.tokens - 1, 0) * plan.token_interval_s
