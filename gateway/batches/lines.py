"""A batch's input, line by line: read from its file as it streams (never whole in memory), each
line taken apart in the shape its API gives it (OpenAI's `custom_id`, `method`, `url`, `body`;
Anthropic's `custom_id`, `params`), and, when the batch is created, checked as the single route
would check it, its worst case summed (gateway.batches.creation)."""

import hashlib
import re
from collections.abc import AsyncIterator

import msgspec

from gateway.batches.endpoints import ROUTES, LineRoute
from gateway.edge.bodies import _param_of
from gateway.edge.errors import ApiError
from gateway.jsonio import decode_body
from ledger.events import BatchLineError

MAX_LINES = 50_000  # OpenAI's most requests a batch input
MAX_ERRORS = 100  # a failed batch names this many bad lines at most
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # Anthropic's; OpenAI's custom_id is any string up to 512
LINE_BYTES = 32 * 1024 * 1024  # one line, at most a single request's body


class Line(msgspec.Struct, frozen=True):
    """One request of a batch: its place (0-based), the client's custom_id, the route's body."""

    index: int
    custom_id: str
    body: dict


class BadLine(Exception):
    """A line the batch cannot run: its error names the line (1-based) and what is wrong."""

    def __init__(self, line: int, code: str, message: str, param: str = "") -> None:
        super().__init__(message)
        self.error = BatchLineError(code=code, message=message, line=line, param=param)


async def split(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The non-empty lines of a JSONL stream, each without its newline."""
    rest = b""
    async for chunk in chunks:
        *whole, rest = (rest + chunk).split(b"\n")
        for line in whole:
            if line.strip():
                yield line
        if len(rest) > LINE_BYTES:
            raise BadLine(0, "line_too_long", f"a line holds more than {LINE_BYTES} bytes")
    if rest.strip():
        yield rest


def parse(api: str, index: int, raw: bytes, endpoint: str) -> Line:
    """A line of the input as its API shapes it; BadLine for what is not such a line."""
    try:
        item = decode_body(raw)
    except ValueError:
        raise BadLine(index + 1, "invalid_json", "the line is not valid JSON") from None
    if not isinstance(item, dict):
        raise BadLine(index + 1, "invalid_request", "the line must be a JSON object")
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id or len(custom_id) > 512:
        raise BadLine(index + 1, "invalid_custom_id", "custom_id must be a non-empty string", "custom_id")
    if api == "anthropic":
        return Line(index, custom_id, _params(index, item))
    return Line(index, custom_id, _openai_body(index, item, endpoint))


def _params(index: int, item: dict) -> dict:
    if not CUSTOM_ID.fullmatch(item["custom_id"]):
        raise BadLine(index + 1, "invalid_custom_id", "custom_id must be 1 to 64 letters, digits, '_' or '-'",
                      "custom_id")
    if not isinstance(params := item.get("params"), dict):
        raise BadLine(index + 1, "invalid_request", "params must be a JSON object", "params")
    return params


def _openai_body(index: int, item: dict, endpoint: str) -> dict:
    if item.get("method") != "POST":
        raise BadLine(index + 1, "invalid_method", "method must be POST", "method")
    if item.get("url") != endpoint:
        raise BadLine(index + 1, "mismatched_url", f"url must be the batch's endpoint, {endpoint}", "url")
    if not isinstance(body := item.get("body"), dict):
        raise BadLine(index + 1, "invalid_request", "body must be a JSON object", "body")
    return body


def request_of(route: LineRoute, line: Line) -> object:
    """The line's body as its route's schema reads it; BadLine as the single route's 400 says."""
    if line.body.get("stream"):
        raise BadLine(line.index + 1, "invalid_request", "a batch line cannot stream", "stream")
    try:
        return msgspec.convert(line.body, route.schema)
    except msgspec.ValidationError as exc:
        raise BadLine(line.index + 1, "invalid_request", f"invalid request: {exc}", _param_of(exc) or "") from None


def refused(line: Line, error: ApiError) -> BadLine:
    """The single route's refusal of a line's body, naming the line."""
    return BadLine(line.index + 1, error.code or "invalid_request", error.message, error.param or "")


class Seen:
    """The custom_ids read so far, as 8-byte digests (a batch's 50,000 ids in ~4 MB, not its ids' size)."""

    def __init__(self) -> None:
        self._digests: set[bytes] = set()

    def add(self, line: Line) -> None:
        """BadLine for a custom_id seen before."""
        digest = hashlib.blake2b(line.custom_id.encode(), digest_size=8).digest()
        if digest in self._digests:
            raise BadLine(line.index + 1, "duplicate_custom_id", f"custom_id {line.custom_id[:80]!r} appears twice",
                          "custom_id")
        self._digests.add(digest)


def route_of(endpoint: str) -> LineRoute:
    return ROUTES[endpoint]
