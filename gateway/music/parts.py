"""Music's own parts, built once per process from its configuration: the signer of /media links
(gateway.music.links) and the Idempotency-Key store (gateway.music.idempotency). `music_ctx`
builds them under the app key MUSIC, after the ledger they claim keys in."""

from collections.abc import AsyncIterator

import msgspec
from aiohttp import web

from gateway.edge.state import CONFIG, LEDGER
from gateway.music.idempotency import IdempotencyKeys
from gateway.music.links import Signer


class MusicParts(msgspec.Struct, frozen=True):
    signer: Signer  # signs and checks the short-lived /media download paths
    idempotency: IdempotencyKeys  # POST /v1/music's Idempotency-Key claims, waits and replays


MUSIC = web.AppKey("music", MusicParts)


async def music_ctx(app: web.Application) -> AsyncIterator[None]:
    """Music's parts for this process; nothing to close."""
    config = app[CONFIG]
    app[MUSIC] = MusicParts(Signer(config.storage.signing_secret, config.storage.signed_url_ttl_s),
                            IdempotencyKeys(app[LEDGER].recorder, config.music.upstream_timeout_s))
    yield
