"""What the routing tests compute: each provider's prices and what a usage costs there."""

from decimal import Decimal

# sim-b is the cheaper: `price` routing prefers it, `priority` (the catalogue's order) sim-a.
PRICES = {"sim-a": ("0.000003", "0.000004"), "sim-b": ("0.000001", "0.000002")}
RATE = Decimal("84.0")


def charge_at(provider: str, prompt_tokens: int, completion_tokens: int) -> int:
    """What `provider` charges for this usage, in INR nano-units (its catalogue price at RATE)."""
    prompt, completion = (Decimal(p) for p in PRICES[provider])
    return int((prompt * prompt_tokens + completion * completion_tokens) * RATE * 1_000_000_000)
