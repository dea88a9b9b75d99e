"""Which price tier a request is charged at, stated once: the gateway picks it with this when it
prices a request, and anyone checking an export against the published prices
(ledger.price_check) checks the tier with it again.

A request is charged at the service tier its provider reports it served, when the prices name
that tier; else, past a long-context threshold, at the highest threshold its prompt exceeds;
else at the standard prices. A batch sent to its provider's batch API is charged its batch
prices: those the catalogue states, else half of each standard price (`batch_default`).
"""

from collections.abc import Iterable, Mapping
from decimal import Decimal

STANDARD = "standard"
BATCH = "batch"
LONG_CONTEXT = "long_context_"  # + the threshold: "long_context_200000"


def long_context(threshold: int) -> str:
    """The name of the tier above `threshold` prompt tokens."""
    return f"{LONG_CONTEXT}{threshold}"


def threshold_of(tier: str) -> int | None:
    """The threshold a long-context tier's name states; None for any other tier."""
    digits = tier.removeprefix(LONG_CONTEXT)
    return int(digits) if tier.startswith(LONG_CONTEXT) and digits.isascii() and digits.isdigit() else None


def tier(prompt_tokens: int, served: str, thresholds: Iterable[int], service_tiers: Mapping[str, object],
         batch: bool = False, has_batch: bool = False) -> str:
    """The tier a request is charged at (see the module's docstring). `served` is the service tier
    its provider reported ("" for the standard one)."""
    if batch and has_batch:
        return BATCH
    if served and served in service_tiers:
        return served
    above = [t for t in thresholds if prompt_tokens > t]
    return long_context(max(above)) if above else STANDARD


def batch_default(standard: Decimal) -> Decimal:
    """A batch price the catalogue does not state: half the standard one (prompt, completion, cache
    reads and writes alike), what OpenAI and Anthropic charge for their batch APIs."""
    return standard / 2
