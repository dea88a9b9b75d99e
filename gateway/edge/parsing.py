"""Parsing at the edge: numbers in query strings and paths (ASCII digits only, bounded) and
header values (printable ASCII), each read one way everywhere.

A `WholeNumber` names a query parameter's bounds and default once; the parser reads them and
so does the OpenAPI document (gateway.edge.openapi), so the two cannot disagree.
"""

import re
from collections.abc import Mapping
from typing import Generic, TypeVar

import msgspec
from aiohttp import web

from gateway.edge.errors import bad_request

MAX_WHOLE = 2**63 - 1  # the largest integer either ledger backend stores
# What no text the gateway looks up or stores may hold: NUL (PostgreSQL refuses it in text) and
# lone surrogates (aiohttp's stand-ins for bytes that are not UTF-8; they cannot be encoded).
NOT_TEXT = re.compile("[\x00\ud800-\udfff]")
_MAX_DIGITS = len(str(MAX_WHOLE))
LOG_ID_PREFIX = "log_"  # a request log row's id is this and its ledger position
LOG_ID_PATTERN = r"^log_[0-9]{1,19}$"  # what log_position accepts (below 2^63 too)
Default = TypeVar("Default", int, None)  # None: the parameter may be absent


def is_whole(text: str, least: int, most: int) -> bool:
    """Whether `text` is a whole number from `least` to `most` in ASCII digits ("²" and "١" are
    digits to str.isdigit, not to us; so are thousands of digits, which int() refuses)."""
    return (text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS
            and least <= int(text) <= most)


def whole_number(text: str, name: str, least: int, most: int) -> int:
    """`text` as an int; 400 naming `name` unless it is a whole number from `least` to `most`."""
    if not is_whole(text, least, most):
        raise bad_request(f"{name} must be a whole number from {least} to {most}, got {text!r}", name)
    return int(text)


def log_position(text: str, name: str) -> int | None:
    """The ledger position a request log id (`log_<n>`) names; None when `text` is no log id (a
    request id, say); 400 naming `name` when it is one whose n is not a whole number in range.
    Every route that takes a log id, in a path or a query, reads it here."""
    if not text.startswith(LOG_ID_PREFIX):
        return None
    digits = text.removeprefix(LOG_ID_PREFIX)
    if not is_whole(digits, 0, MAX_WHOLE):
        raise bad_request(f"{name} must be a log id such as 'log_123' (ASCII digits, below 2^63),"
                          f" got {text!r}", name)
    return int(digits)


class WholeNumber(msgspec.Struct, Generic[Default], frozen=True):
    """A whole-number query parameter: its name, bounds and default (None: it may be absent)."""

    name: str
    least: int
    most: int
    default: Default
    description: str = ""

    def read(self, query: Mapping[str, str]) -> int | Default:
        text = query.get(self.name)
        return self.default if text is None else self.parse(text)

    def parse(self, text: str) -> int:
        """The parameter's text as an int; 400 naming it unless it is in bounds."""
        return whole_number(text, self.name, self.least, self.most)

    def schema(self) -> dict:
        schema = {"type": "integer", "minimum": self.least, "maximum": self.most}
        return schema if self.default is None else {**schema, "default": self.default}


def header(request: web.BaseRequest, name: str) -> str | None:
    """A header's value; 400 naming it unless it is printable ASCII (aiohttp hands over other
    bytes undecoded, as surrogates, which no key, id or token of ours can contain)."""
    value = request.headers.get(name)
    if value is not None and not printable(value):
        raise bad_request(f"the {name} header must be printable ASCII", name)
    return value


def printable(text: str) -> bool:
    return text.isascii() and text.isprintable()


def check_url(request: web.Request) -> None:
    """400 naming the first path or query parameter that is not text (see NOT_TEXT)."""
    for name, value in (*request.match_info.items(), *request.query.items()):
        if NOT_TEXT.search(name) or NOT_TEXT.search(value):
            raise bad_request(f"{name!r} holds a NUL or bytes that are not UTF-8", name)
