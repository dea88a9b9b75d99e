"""Exact money: Decimal arithmetic, stored as integer nano-units (1e-9) of a currency."""

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

NANO = Decimal("0.000000001")
_NANO_PER_UNIT = 1_000_000_000


class InvalidAmount(ValueError):
    """A money amount that is not a finite decimal number."""


def parse_amount(text: str | int | Decimal) -> Decimal:
    """Parse a decimal amount given as text (never a float, which would already be inexact)."""
    try:
        amount = Decimal(str(text).strip())
    except InvalidOperation as exc:
        raise InvalidAmount(f"not a decimal amount: {text!r}") from exc
    if not amount.is_finite():
        raise InvalidAmount(f"not a finite amount: {text!r}")
    return amount


def to_nano(amount: Decimal) -> int:
    """Round an exact amount to whole nano-units (banker's rounding, so no bias builds up)."""
    return int(amount.quantize(NANO, rounding=ROUND_HALF_EVEN).scaleb(9))


def from_nano(nano: int) -> Decimal:
    """The exact decimal amount of `nano` nano-units, normalised (no trailing zeros)."""
    value = Decimal(nano).scaleb(-9)
    return value.normalize() if value else Decimal(0)


def format_amount(amount: Decimal) -> str:
    """Plain positional notation, never an exponent: 0.0000009, not 9E-7."""
    text = f"{amount:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
