"""What a request costs and is charged, from what its event records: the one statement of the
pricing formula and of the charging rule. The gateway prices requests with it, and anyone
checking an export (ledger.export_check) prices them again with it.
"""

from decimal import Decimal

from ledger.events import Priced, RequestCompleted
from ledger.money import format_amount, from_nano, to_nano

CHARGED_STATUSES = (200, 499)  # delivered, or left by its client after delivery began


def usd_nano(priced: Priced, prompt_tokens: int, completion_tokens: int) -> tuple[int, int]:
    """(input, output) cost in nano-USD: each prompt token at its price (plain, read from the
    cache, written to it for five minutes or for an hour), audio seconds at the per-minute price, the flat price; each
    completion token at the completion price. Each part rounded once, to the nano."""
    plain = prompt_tokens - priced.cached_tokens - priced.cache_write_tokens - priced.cache_write_1h_tokens
    usd_in = (plain * Decimal(priced.prompt_usd) + priced.cached_tokens * Decimal(priced.cache_read_usd)
              + priced.cache_write_tokens * Decimal(priced.cache_write_usd)
              + priced.cache_write_1h_tokens * Decimal(priced.cache_write_1h_usd)
              + Decimal(priced.seconds) * Decimal(priced.per_minute_usd) / 60 + Decimal(priced.flat_usd))
    return to_nano(usd_in), to_nano(completion_tokens * Decimal(priced.completion_usd))


def inr_nano(usd_total_nano: int, rate: Decimal) -> int:
    """The exact USD total at `rate` INR a dollar, rounded to the nano-rupee."""
    return to_nano(from_nano(usd_total_nano) * rate)


def charged(status: int, byok: bool) -> bool:
    """The billing rule (spec 7), stated once: a request delivered (200) or left by its client
    (499) is charged what it delivered, unless the organization paid the provider with its own
    key. Other statuses (failures) are recorded, not charged."""
    return status in CHARGED_STATUSES and not byok


def per_token(prompt: Decimal, completion: Decimal, cache_read: Decimal | None = None,
              cache_write: Decimal | None = None, cache_write_1h: Decimal | None = None) -> Priced:
    """Per-token USD prices as a request records them; a cache price not given is the prompt
    price, a one-hour cache write not given the five-minute one."""
    write = prompt if cache_write is None else cache_write
    return Priced(prompt_usd=format_amount(prompt), completion_usd=format_amount(completion),
                  cache_read_usd=format_amount(prompt if cache_read is None else cache_read),
                  cache_write_usd=format_amount(write),
                  cache_write_1h_usd=format_amount(write if cache_write_1h is None else cache_write_1h))


def misstated(event: RequestCompleted) -> str | None:
    """How a request's recorded cost or charge differs from what its own fields make it (None:
    it does not): the USD cost from its tokens and prices (when it records them: `priced`),
    the INR cost from the USD cost and its rate, the charge from the billing rule."""
    try:
        if event.priced is not None and (usd := sum(usd_nano(event.priced, event.prompt_tokens,
                                                             event.completion_tokens))) != event.cost_usd_nano:
            return f"cost_usd_nano is {event.cost_usd_nano}, but its tokens at its prices cost {usd}"
        inr = inr_nano(event.cost_usd_nano, Decimal(event.usd_to_inr))
    except (ArithmeticError, ValueError):  # decimal's InvalidOperation, int() of a NaN
        return "a price or the rate it records is not a finite number"
    if inr != event.cost_inr_nano:
        return (f"cost_inr_nano is {event.cost_inr_nano}, but {event.cost_usd_nano} nano-USD"
                f" at {event.usd_to_inr} is {inr}")
    return _charge_misstated(event)


def _charge_misstated(event: RequestCompleted) -> str | None:
    if event.priced is None:  # recorded before `byok` was: either it was charged its cost or not at all
        due = (event.cost_inr_nano, 0) if charged(event.status, False) else (0,)
    else:
        due = (event.cost_inr_nano if charged(event.status, event.byok) else 0,)
    if event.charged_inr_nano not in due:
        return (f"charged_inr_nano is {event.charged_inr_nano}, but a status {event.status} request"
                f"{' on its own key' if event.byok else ''} costing {event.cost_inr_nano} is charged {due[0]}")
    return None
