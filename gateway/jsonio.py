"""JSON codecs, built once. Decimals go out as exact JSON numbers, never as floats."""

from decimal import Decimal

import msgspec
import orjson

from ledger.money import format_amount

_encoder = msgspec.json.Encoder(decimal_format="number")

encode = _encoder.encode
loads = orjson.loads
# For request bodies (up to ~112 MB): orjson copies a long string once more while decoding it.
decode_body = msgspec.json.decode


def number(amount: Decimal) -> msgspec.Raw:
    """An exact decimal as a JSON number in positional notation (clients parse 9E-7 badly)."""
    return msgspec.Raw(format_amount(amount).encode())


def lines(obj: object) -> bytes:
    """One JSON object and a newline, as the CLI prints."""
    return _encoder.encode(obj) + b"\n"
