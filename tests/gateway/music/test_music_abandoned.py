"""A music request whose client goes away mid-generation (spec 4.1, 8): the cancelled handler
records the failure (status 499, not charged), releases its hold and its Idempotency-Key, and a
retry with the same key generates anew. Over real sockets: the client really disconnects."""

import asyncio
import json
from decimal import Decimal

from ledger.events import (
    CreditsHeld, HoldReleased, IdempotencyKeyClaimed, IdempotencyKeyReleased, MusicTrackRecorded, RequestCompleted,
)
from tests.support import auth, poll, upstream_requests

RATE = Decimal("84.0")
SLOW = {"model": "tune-3-clip-preview", "prompt": "calm lo-fi beat [sim:latency_ms=1500]"}


async def abandon(gateway, simulator, key: str, idempotency_key: str) -> None:
    """POST SLOW on a raw connection, then close it once the simulator has the upstream call."""
    body = json.dumps(SLOW).encode()
    _, writer = await asyncio.open_connection(gateway.server.host, gateway.server.port)
    head = (f"POST /v1/music HTTP/1.1\r\nHost: {gateway.server.host}\r\nAuthorization: Bearer {key}\r\n"
            f"Idempotency-Key: {idempotency_key}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    writer.write(head.encode() + body)
    await writer.drain()
    calls = await poll(lambda: music_calls(gateway, simulator))
    assert len(calls) == 1, "the generation never reached upstream"
    writer.close()
    await writer.wait_closed()


async def music_calls(gateway, simulator) -> list[dict]:
    return [r for r in await upstream_requests(gateway, simulator) if r["path"].startswith("/v1beta/")]


async def events_of(gateway, kind: type) -> list:
    return [r.event for r in await gateway.events() if isinstance(r.event, kind)]


async def test_an_abandoned_generation_is_recorded_as_499_uncharged_and_frees_its_key(gateway, simulator):
    org = await gateway.new_org("50")
    await abandon(gateway, simulator, org["api_key"], "left-1")

    (track,) = await poll(lambda: events_of(gateway, MusicTrackRecorded))
    assert track.error is True and track.storage == "none"
    (completed,) = await events_of(gateway, RequestCompleted)
    assert completed.status == 499 and completed.charged_inr_nano == 0
    assert [type(e) for e in await events_of(gateway, (CreditsHeld, HoldReleased))] == [CreditsHeld, HoldReleased]
    (released,) = await events_of(gateway, IdempotencyKeyReleased)
    assert (released.idempotency_key, released.request_id) == ("left-1", track.request_id)
    assert await gateway.balance(org["org_id"]) == Decimal(50)

    # The key is free again: the retry generates (a second upstream call) and is charged once.
    retry = await gateway.client.post("/v1/music", json=SLOW, headers={**auth(org["api_key"]),
                                                                       "Idempotency-Key": "left-1"})
    assert retry.status == 200, await retry.text()
    assert (await retry.json())["id"] != track.request_id
    assert len(await music_calls(gateway, simulator)) == 2
    assert len(await events_of(gateway, IdempotencyKeyClaimed)) == 2
    assert await gateway.balance(org["org_id"]) == Decimal(50) - Decimal("0.05") * RATE
