"""A request's stored content, written and read in one place: what a streamed answer keeps of
its own text (for the request log, the organization's retention and the Responses API's closing
events), the mark of text that was cut, and a content row read back (for the request log's
detail and for stored Responses).

At most KEPT_TEXT_CHARS characters are kept, so a stream of any length relays in bounded memory;
what is cut is noted (`truncated`). A row read back is kept, removed (by text retention) or was
never kept (retention none, or nothing to keep).
"""

from typing import Literal

from gateway.jsonio import loads
from ledger import log_queries
from ledger.recorder import Recorder

KEPT_TEXT_CHARS = 1 << 20  # 1 MiB of ASCII text per request (README: retention)

State = Literal["kept", "removed", "not_retained"]


class KeptText:
    """The first `cap` characters of a stream's text, or none of them when nothing is kept
    (retention `none`); `truncated` says whether kept text was cut."""

    def __init__(self, keep: bool = True, cap: int = KEPT_TEXT_CHARS) -> None:
        self.parts: list[str] = []
        self.room = cap if keep else 0
        self.keep, self.truncated = keep, False

    def add(self, text: str) -> None:
        if len(text) > self.room:
            self.truncated = self.keep and bool(text)
            text = text[:self.room]
        if text:
            self.parts.append(text)
            self.room -= len(text)

    def text(self) -> str:
        """The kept text, joined into one part (so repeated reads join once)."""
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""

    def marked(self, kept: dict) -> dict:
        return marked(kept, self.truncated)


def marked(kept: dict, truncated: bool) -> dict:
    """`kept` (a request's content row) noting, when it was, that its text was cut to the cap."""
    return {**kept, "truncated": True} if truncated else kept


async def read(recorder: Recorder, content_id: str) -> tuple[dict | None, State]:
    """One content row decoded, and whether it is kept, removed or was never kept."""
    if not content_id:
        return None, "not_retained"
    if (row := await log_queries.text(recorder, content_id)) is None:
        return None, "not_retained"
    if row.removed_at_us is not None:
        return None, "removed"
    return (None, "not_retained") if row.body is None else (loads(row.body), "kept")
