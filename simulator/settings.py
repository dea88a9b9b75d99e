"""Process-wide defaults of the simulator; in-prompt directives override them per request."""

import msgspec
from aiohttp import web


class Settings(msgspec.Struct, frozen=True):
    """How the simulated upstream behaves when a request carries no directives.

    latency_ms: wait this long before sending response headers.
    tokens_per_second: generation speed; 0 means "as fast as possible".
    completion_tokens: how many tokens a completion has unless a directive says otherwise.
    """

    latency_ms: int = 0
    tokens_per_second: float = 0
    completion_tokens: int = 16


SETTINGS_KEY = web.AppKey("settings", Settings)
