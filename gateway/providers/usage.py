"""What an upstream reports it used (Usage), and the checks a report must pass before anything
is priced on it: every adapter reads its provider's usage through these, and billing
(gateway.billing.pricing) prices only what passed them.
"""

import re
from decimal import Decimal

import msgspec

from gateway.edge.errors import UpstreamError

# The most one request may report. Far above any model's context plus output (and any audio
# upload), far below what could overflow a price computation: larger is a broken upstream.
MAX_REPORTED_TOKENS = 10**8
MAX_REPORTED_SECONDS = 10**6
# What providers call their standard tier (OpenAI "default", or "auto" echoed back; Anthropic
# "standard"; Bedrock "default"; Groq, an OpenAI-protocol host, "on_demand"): reported as "" so
# billing has one name for it.
STANDARD_TIERS = frozenset({"default", "auto", "standard", "on_demand"})
# A tier name billing may look up: anything else is a broken report, never billed as standard.
_TIER_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")


class Usage(msgspec.Struct, frozen=True):
    """What one request used, as its provider reported it. `prompt_tokens` is the whole prompt:
    its plain tokens plus three disjoint parts, the cache reads and the two kinds of cache write."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # the part of prompt_tokens read from the provider's prompt cache
    # The part written to it with a five-minute (or unstated) lifetime; Anthropic prices it apart.
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0  # the part written to it with a one-hour lifetime (dearer again)
    # The tier the provider says it served (never the one asked for): "" standard, else its
    # lower-case name ("flex", "priority", ...), as `served_tier` reads it.
    service_tier: str = ""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def invalid_usage(provider: str, problem: str) -> UpstreamError:
    """A provider's usage report billing cannot trust: its answer is a 502, recorded, not charged."""
    return UpstreamError(502, f"{provider} sent an invalid usage report: {problem}")


def usage_report(provider: str, value: object, name: str = "usage") -> dict:
    """A usage object (or one of its parts, `name`) as reported (absent or null: empty);
    anything but a JSON object is invalid."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid_usage(provider, f"{name} is {_shown(value)}, not an object")
    return value


def token_count(provider: str, report: dict, name: str) -> int:
    """`report[name]` as a token count (absent or null: 0). Only an integer from 0 to
    MAX_REPORTED_TOKENS is one: never a bool, a float or a string."""
    value = report.get(name)
    if value is None:
        return 0
    if not _is_count(value):
        raise invalid_usage(provider, f"{name} is {_shown(value)}")
    return value


def five_minute_writes(provider: str, written: int, one_hour: int) -> int:
    """The cache writes of a five-minute (or unstated) lifetime, from a report of all `written`
    and the `one_hour` part of them (Anthropic's and Bedrock's way); more one-hour writes than
    writes is an invalid report."""
    if one_hour > written:
        raise invalid_usage(provider, f"{one_hour} one-hour cache writes exceed the {written} written")
    return written - one_hour


def served_tier(provider: str, value: object) -> str:
    """The service tier a provider reports it served, as Usage names it: "" for its standard
    tier (or none reported), else the lower-case name. A name that is not a short identifier
    is an invalid report: billing must not price an unknown tier as the standard one."""
    if value is None:
        return ""
    if not isinstance(value, str) or not _TIER_NAME.fullmatch(tier := value.lower()):
        raise invalid_usage(provider, f"service tier is {_shown(value)}")
    return "" if tier in STANDARD_TIERS else tier


def openai_tier(served: str) -> str:
    """A served tier (Usage.service_tier) by OpenAI's name for it, as the `service_tier` of the
    chat completions the gateway translates from other providers reports it."""
    return served or "default"


def checked_usage(provider: str, usage: Usage) -> Usage:
    """`usage` when its parts add up: the cached and cache-written tokens are part of the prompt,
    every total is within MAX_REPORTED_TOKENS and the tier is one `served_tier` gives. Every
    adapter's usage passes here."""
    parts = (usage.cached_prompt_tokens, usage.cache_write_tokens, usage.cache_write_1h_tokens)
    counts = (usage.prompt_tokens, usage.completion_tokens, *parts)
    if not all(_is_count(n) for n in counts):  # sums of sound counts may still be too large
        raise invalid_usage(provider, f"token counts {counts} are out of bounds")
    if sum(parts) > usage.prompt_tokens:
        raise invalid_usage(provider, f"{usage.cached_prompt_tokens} cached and"
                                      f" {usage.cache_write_tokens + usage.cache_write_1h_tokens}"
                                      f" cache-written tokens exceed the {usage.prompt_tokens} prompt tokens")
    if usage.service_tier and served_tier(provider, usage.service_tier) != usage.service_tier:
        raise invalid_usage(provider, f"service tier {_shown(usage.service_tier)} is not a served tier's name")
    return usage


def reported_seconds(provider: str, name: str, value: object) -> Decimal | None:
    """A reported audio duration as an exact Decimal (None when not reported): a non-negative
    number of at most MAX_REPORTED_SECONDS, never a bool or a string."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_REPORTED_SECONDS:
        raise invalid_usage(provider, f"{name} is {_shown(value)}")
    return Decimal(str(value))


def _is_count(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value <= MAX_REPORTED_TOKENS


def _shown(value: object) -> str:
    return repr(value)[:40]
