"""What an upstream reports it used (Usage), and the checks a report must pass before anything
is priced on it: every adapter reads its provider's usage through these, and billing
(gateway.billing.pricing) prices only what passed them.
"""

from decimal import Decimal

import msgspec

from gateway.edge.errors import UpstreamError

# The most one request may report. Far above any model's context plus output (and any audio
# upload), far below what could overflow a price computation: larger is a broken upstream.
MAX_REPORTED_TOKENS = 10**8
MAX_REPORTED_SECONDS = 10**6


class Usage(msgspec.Struct, frozen=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # the part of prompt_tokens read from the provider's prompt cache
    cache_write_tokens: int = 0  # the part of prompt_tokens written to it (Anthropic prices it apart)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def invalid_usage(provider: str, problem: str) -> UpstreamError:
    """A provider's usage report billing cannot trust: its answer is a 502, recorded, not charged."""
    return UpstreamError(502, f"{provider} sent an invalid usage report: {problem}")


def usage_report(provider: str, value: object) -> dict:
    """A usage object as reported (absent or null: empty); anything but a JSON object is invalid."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid_usage(provider, f"usage is {_shown(value)}, not an object")
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


def checked_usage(provider: str, usage: Usage) -> Usage:
    """`usage` when its parts add up: the cached and cache-written tokens are part of the prompt
    and every total is within MAX_REPORTED_TOKENS. Every adapter's usage passes here."""
    counts = (usage.prompt_tokens, usage.completion_tokens, usage.cached_prompt_tokens, usage.cache_write_tokens)
    if not all(_is_count(n) for n in counts):  # sums of sound counts may still be too large
        raise invalid_usage(provider, f"token counts {counts} are out of bounds")
    if usage.cached_prompt_tokens + usage.cache_write_tokens > usage.prompt_tokens:
        raise invalid_usage(provider, f"{usage.cached_prompt_tokens} cached and {usage.cache_write_tokens}"
                                      f" cache-written tokens exceed the {usage.prompt_tokens} prompt tokens")
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
