"""Process-wide defaults of the simulator; in-prompt directives override them per request."""

import msgspec
from aiohttp import web


class Settings(msgspec.Struct, frozen=True):
    """How the simulated upstream behaves when a request carries no directives.

    latency_ms: wait this long before sending response headers.
    tokens_per_second: generation speed; 0 means "as fast as possible".
    completion_tokens: how many tokens a completion has unless a directive says otherwise.
    echo_key: refuse every provider request with its family's 401, quoting the key received
        as real providers do (as it is, in `Bearer <key>` and URL-encoded), so tests can check
        that no key travels on to a client, a log or the ledger.
    outage: start in an outage (`simulator.outage`): a status such as "503", "hang" or "drop".
    """

    latency_ms: int = 0
    tokens_per_second: float = 0
    completion_tokens: int = 16
    echo_key: bool = False
    outage: str = ""


SETTINGS_KEY = web.AppKey("settings", Settings)
