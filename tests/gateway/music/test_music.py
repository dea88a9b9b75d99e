"""POST /v1/music, history and downloads: spec 2.1, 2.2, 3, 4.1-4.3, 7, 8 over real sockets."""

import asyncio
import base64
import json
from decimal import Decimal

import msgspec
import pytest

from gateway.catalogue import SHIPPED_PATH
from ledger import audit
from ledger.events import CreditsHeld, HoldReleased, MusicTrackRecorded, RequestCompleted
from simulator.mp3 import mp3_duration_s
from gateway.music.parts import MUSIC
from tests.support import auth, count_objects, decimal_json

RATE = Decimal("84.0")
PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)
JPEG = b"\xff\xd8\xff\xe0" + bytes(64)


def data_url(data: bytes, subtype: str = "png") -> str:
    return f"data:image/{subtype};base64,{base64.b64encode(data).decode()}"


def clip(prompt: str = "calm lo-fi beat with soft piano", **extra) -> dict:
    return {"model": "tune-3-clip-preview", "prompt": prompt, **extra}


async def post_music(gateway, key: str, body: dict, **headers):
    return await gateway.client.post("/v1/music", json=body, headers={**auth(key), **headers})


async def upstream_calls(gateway, simulator) -> list[dict]:
    recorded = await (await gateway.client.session.get(simulator.make_url("/_sim/requests"))).json()
    return [r for r in recorded["data"] if r["path"].startswith("/v1beta/")]


async def track_events(gateway) -> list:
    return [r.event for r in await gateway.events() if isinstance(r.event, MusicTrackRecorded)]


# -- the generation object ------------------------------------------------------------------------

async def test_hosted_clip_generation_has_every_field_of_spec_2_1(hosted, hosted_org):
    response = await post_music(hosted, hosted_org["api_key"], clip())
    assert response.status == 200, await response.text()
    body = decimal_json(await response.read())
    assert body["id"].startswith("req_") and body["object"] == "music.generation"
    assert (body["model"], body["used_model"], body["used_provider"]) == (
        "tune-3-clip-preview", "tune-3-clip-preview", "google")
    audio = body["audio"]
    assert audio["mime_type"] == "audio/mpeg" and audio["storage"] == "s3"
    assert audio["url"] == f"/v1/music/{body['id']}/content" and audio["expires_in_days"] == 30
    assert 25 <= mp3_duration_s(base64.b64decode(audio["base64"])) <= 35
    assert "<" in body["text"]  # lyrics with structure markers
    assert body["usage"] == {"cost_usd": Decimal("0.05"), "cost_inr": Decimal("0.05") * RATE}
    assert isinstance(body["created"], int)
    assert await hosted.balance(hosted_org["org_id"]) == Decimal(50) - Decimal("0.05") * RATE


async def test_pro_generation_costs_0_08_and_takes_reference_images(hosted, hosted_org, simulator):
    body = {"model": "tune-3-pro-preview", "prompt": "epic orchestral", "reference_images":
            [data_url(PNG), data_url(JPEG, "jpeg")]}
    response = await post_music(hosted, hosted_org["api_key"], body)
    assert response.status == 200, await response.text()
    result = decimal_json(await response.read())
    assert result["usage"]["cost_inr"] == Decimal("0.08") * RATE
    assert 120 <= mp3_duration_s(base64.b64decode(result["audio"]["base64"])) <= 180
    (call,) = await upstream_calls(hosted, simulator)
    parts = call["body"]["contents"][0]["parts"]
    assert parts[0]["text"] == "epic orchestral"
    assert [p["inlineData"]["mimeType"] for p in parts[1:]] == ["image/png", "image/jpeg"]
    assert base64.b64decode(parts[1]["inlineData"]["data"]) == PNG


@pytest.mark.parametrize(("extra", "sent"), [
    ({"instrumental": True}, "waves\n\nInstrumental only, no vocals."),
    ({"lyrics": "[Verse] hello"}, "waves\n\nLyrics:\n[Verse] hello"),
    ({"instrumental": True, "lyrics": "[Verse] ignored"}, "waves\n\nInstrumental only, no vocals."),
])
async def test_prompt_composition(gateway, org, simulator, extra, sent):
    response = await post_music(gateway, org["api_key"], clip("waves", **extra))
    assert response.status == 200
    (call,) = await upstream_calls(gateway, simulator)
    assert call["body"]["contents"][0]["parts"][0]["text"] == sent


# -- storage modes ----------------------------------------------------------------------------------

async def test_without_object_storage_the_audio_is_inline(gateway, org):
    body = (await (await post_music(gateway, org["api_key"], clip())).json())
    assert body["audio"]["storage"] == "inline"
    assert "url" not in body["audio"] and "expires_in_days" not in body["audio"]
    assert base64.b64decode(body["audio"]["base64"])[:3] in (b"ID3", b"\xff\xfb"[:3])


async def test_retention_none_persists_nothing(hosted, s3_config):
    org = await hosted.new_org("50", retention="none")
    body = await (await post_music(hosted, org["api_key"], clip("secret idea"))).json()
    assert body["audio"]["storage"] == "none" and "url" not in body["audio"]
    assert await hosted.ledger.recorder._fetch("SELECT COUNT(*) FROM content") == [(0,)]
    db = (await hosted.ledger.recorder._fetch("SELECT COUNT(*) FROM music_tracks WHERE object_key != ''"))
    assert db == [(0,)]
    history = await (await hosted.client.get("/v1/music", headers=auth(org["api_key"]))).json()
    assert history["data"][0]["prompt"] == "" and history["data"][0]["audio"]["storage"] == "none"


# -- downloads and ranges -----------------------------------------------------------------------------

async def _generate_hosted(gateway, org) -> tuple[str, bytes]:
    body = await (await post_music(gateway, org["api_key"], clip())).json()
    return body["id"], base64.b64decode(body["audio"]["base64"])


async def test_download_works_immediately_through_the_302(hosted, hosted_org):
    track_id, audio = await _generate_hosted(hosted, hosted_org)
    response = await hosted.client.get(f"/v1/music/{track_id}/content", headers=auth(hosted_org["api_key"]),
                                       allow_redirects=False)
    assert response.status == 302
    location = response.headers["Location"]
    assert location.startswith("/media/") and "signature=" in location and "expires=" in location
    download = await hosted.client.get(location)
    assert download.status == 200 and await download.read() == audio
    assert download.headers["Accept-Ranges"] == "bytes" and download.headers["ETag"].startswith('"')


async def test_log_row_id_resolves_like_the_request_id(hosted, hosted_org):
    _track_id, _ = await _generate_hosted(hosted, hosted_org)
    history = await (await hosted.client.get("/v1/music", headers=auth(hosted_org["api_key"]))).json()
    log_id = history["data"][0]["log_id"]
    response = await hosted.client.get(f"/v1/music/{log_id}/content", headers=auth(hosted_org["api_key"]),
                                       allow_redirects=False)
    assert response.status == 302


@pytest.fixture
async def media(hosted, hosted_org):
    track_id, audio = await _generate_hosted(hosted, hosted_org)
    response = await hosted.client.get(f"/v1/music/{track_id}/content", headers=auth(hosted_org["api_key"]),
                                       allow_redirects=False)
    return response.headers["Location"], audio


def _slice(audio: bytes, spec: str) -> tuple[int, int]:
    first, _, last = spec.partition("-")
    size = len(audio)
    if not first:
        return max(0, size - int(last)), size - 1
    return int(first), min(size - 1, int(last)) if last else size - 1


@pytest.mark.parametrize("spec", [
    "0-0", "0-99", "100-199", "1000-", "-1", "-500", "0-", "5-5", "-999999999", "0-999999999",
    "LAST-", "LAST-LAST", "10-1000000000", "4096-8191", "-4096",
])
async def test_single_ranges_return_exactly_the_slice(hosted, media, spec):
    location, audio = media
    spec = spec.replace("LAST", str(len(audio) - 1))
    response = await hosted.client.get(location, headers={"Range": f"bytes={spec}"})
    first, last = _slice(audio, spec)
    assert response.status == 206
    assert response.headers["Content-Range"] == f"bytes {first}-{last}/{len(audio)}"
    assert await response.read() == audio[first:last + 1]


async def test_unsatisfiable_range_is_416_with_the_size(hosted, media):
    location, audio = media
    response = await hosted.client.get(location, headers={"Range": f"bytes={len(audio)}-"})
    assert response.status == 416 and response.headers["Content-Range"] == f"bytes */{len(audio)}"


async def test_if_range_and_head(hosted, media):
    location, audio = media
    etag = (await hosted.client.head(location)).headers["ETag"]
    matching = await hosted.client.get(location, headers={"Range": "bytes=0-9", "If-Range": etag})
    assert matching.status == 206 and await matching.read() == audio[:10]
    stale = await hosted.client.get(location, headers={"Range": "bytes=0-9", "If-Range": '"stale"'})
    assert stale.status == 200 and await stale.read() == audio
    head = await hosted.client.head(location)
    assert head.status == 200 and int(head.headers["Content-Length"]) == len(audio)


async def test_tampered_or_expired_signatures_are_403(hosted, media):
    location, _ = media
    path, _, query = location.partition("?")
    tampered_sig = location[:-1] + ("0" if location[-1] != "0" else "1")
    other_object = path[:-5] + "x.mp3?" + query
    later_expiry = location.replace("expires=", "expires=9")
    for bad in (tampered_sig, other_object, later_expiry, path):
        assert (await hosted.client.get(bad)).status == 403, bad


async def test_expired_signature_is_403(make_gateway, s3_config):
    storage = msgspec.structs.replace(s3_config.storage, signed_url_ttl_s=1)
    gateway = await make_gateway(msgspec.structs.replace(s3_config, storage=storage))
    org = await gateway.new_org("50")
    track_id, _ = await _generate_hosted(gateway, org)
    location = (await gateway.client.get(f"/v1/music/{track_id}/content", headers=auth(org["api_key"]),
                                         allow_redirects=False)).headers["Location"]
    await asyncio.sleep(2.1)
    assert (await gateway.client.get(location)).status == 403


async def test_another_orgs_track_is_404_identical_to_unknown(hosted, hosted_org):
    track_id, _ = await _generate_hosted(hosted, hosted_org)
    stranger = await hosted.new_org("1")
    foreign = await hosted.client.get(f"/v1/music/{track_id}/content", headers=auth(stranger["api_key"]),
                                      allow_redirects=False)
    unknown = await hosted.client.get("/v1/music/req_doesnotexist/content", headers=auth(stranger["api_key"]),
                                      allow_redirects=False)
    assert foreign.status == unknown.status == 404
    assert await foreign.read() == await unknown.read()  # byte for byte: existence never leaks
    history = await (await hosted.client.get("/v1/music", headers=auth(stranger["api_key"]))).json()
    assert history["data"] == []


# -- history ----------------------------------------------------------------------------------------

async def test_history_items_have_every_field_of_spec_2_2_newest_first(hosted, hosted_org):
    first, _ = await _generate_hosted(hosted, hosted_org)
    await post_music(hosted, hosted_org["api_key"], clip("[sim:status=500]"))
    response = await hosted.client.get("/v1/music", headers=auth(hosted_org["api_key"]))
    assert response.status == 200 and response.headers["Cache-Control"] == "no-store"
    body = decimal_json(await response.read())
    assert body["object"] == "list"
    failed, ok = body["data"]
    assert ok["id"] == first and ok["object"] == "music.generation"
    assert ok["prompt"] == "calm lo-fi beat with soft piano" and isinstance(ok["created"], int)
    assert ok["audio"] == {"url": f"/v1/music/{first}/content", "mime_type": "audio/mpeg", "storage": "s3"}
    assert ok["usage"] == {"cost_inr": Decimal("0.05") * RATE}
    assert ok["metadata"] == {"used_model": "tune-3-clip-preview", "used_provider": "google",
                              "response_format": "mp3"}
    assert ok["expired"] is False and ok["error"] is False
    assert failed["error"] is True and failed["usage"]["cost_inr"] == 0 and failed["audio"] is None


@pytest.mark.parametrize(("query", "status", "count"), [
    ("", 200, 3), ("?limit=2", 200, 2), ("?limit=100", 200, 3), ("?limit=101", 400, 0),
    ("?limit=0", 400, 0), ("?limit=abc", 400, 0),
])
async def test_history_limit(gateway, org, query, status, count):
    for _ in range(3):
        await post_music(gateway, org["api_key"], clip())
    response = await gateway.client.get(f"/v1/music{query}", headers=auth(org["api_key"]))
    assert response.status == status
    if status == 200:
        assert len((await response.json())["data"]) == count
    else:
        assert (await response.json())["error"]["param"] == "limit"


# -- validation ------------------------------------------------------------------------------------

def pro_with_images(images: list[str]) -> dict:
    return {"model": "tune-3-pro-preview", "prompt": "x", "reference_images": images}


@pytest.mark.parametrize(("body", "param"), [
    ({"prompt": "x"}, "model"),
    ({"model": "no-such", "prompt": "x"}, "model"),
    ({"model": "gpt-4o-mini", "prompt": "x"}, "model"),
    ({"model": "tune-3-clip-preview"}, "prompt"),
    (clip(""), "prompt"),
    (clip("   "), "prompt"),
    (clip("x" * 4097), "prompt"),
    (clip(response_format="wav"), "response_format"),
    (clip(reference_images=[data_url(PNG)]), "reference_images"),
    (pro_with_images([data_url(PNG)] * 11), "reference_images"),
    (pro_with_images(["https://example.com/a.png"]), "reference_images[0]"),
    (pro_with_images([data_url(PNG, "gif")]), "reference_images[0]"),
    (pro_with_images([data_url(JPEG, "png")]), "reference_images[0]"),
    (pro_with_images(["data:image/png;base64,!!!"]), "reference_images[0]"),
    (pro_with_images([data_url(PNG + bytes(8 * 1024 * 1024))]), "reference_images[0]"),
])
async def test_invalid_music_requests_are_400_naming_the_problem(gateway, org, simulator, body, param):
    response = await post_music(gateway, org["api_key"], body)
    assert response.status == 400
    assert (await response.json())["error"]["param"] == param
    assert await upstream_calls(gateway, simulator) == []
    assert await track_events(gateway) == []


async def test_prompt_of_exactly_4096_characters_is_accepted(gateway, org):
    assert (await post_music(gateway, org["api_key"], clip("x" * 4096))).status == 200


async def test_oversized_body_is_413_before_it_is_sent(gateway, org):
    host, port = gateway.server.host, gateway.server.port
    reader, writer = await asyncio.open_connection(host, port)
    writer.write((f"POST /v1/music HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {org['api_key']}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 999999999\r\n\r\n").encode())
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 5)  # no body was sent at all
    writer.close()
    assert b" 413 " in status_line


# -- upstream outcomes -----------------------------------------------------------------------------

@pytest.mark.parametrize(("directive", "status"), [
    ("[sim:block=prompt]", 422), ("[sim:block=candidate]", 422), ("[sim:block=400]", 422),
    ("[sim:no_audio]", 502), ("[sim:status=429]", 429), ("[sim:status=500]", 502),
    ("[sim:status=503]", 502), ("[sim:status=529]", 502), ("[sim:drop_after=0]", 502),
])
async def test_upstream_outcomes_are_mapped_logged_and_not_charged(hosted, hosted_org, simulator, directive, status):
    response = await post_music(hosted, hosted_org["api_key"], clip(f"song {directive}"))
    assert response.status == status, await response.text()
    assert await hosted.balance(hosted_org["org_id"]) == Decimal(50)
    assert len(await upstream_calls(hosted, simulator)) == 1  # never retried
    (track,) = await track_events(hosted)
    assert track.error is True and track.storage == "none"
    (charge,) = [r.event for r in await hosted.events() if isinstance(r.event, RequestCompleted)]
    assert charge.status == status and charge.charged_inr_nano == 0
    held = [r.event for r in await hosted.events() if isinstance(r.event, (CreditsHeld, HoldReleased))]
    assert [type(e) for e in held] == [CreditsHeld, HoldReleased]
    assert (await hosted.ledger.recorder._fetch("SELECT held_inr_nano FROM orgs WHERE org_id = ?",
                                               (hosted_org["org_id"],))) == [(0,)]


async def test_upstream_timeout_is_504_and_not_charged(make_gateway, config, simulator):
    music = msgspec.structs.replace(config.music, upstream_timeout_s=0.5)
    gateway = await make_gateway(msgspec.structs.replace(config, music=music))
    org = await gateway.new_org("50")
    response = await post_music(gateway, org["api_key"], clip("[sim:hang]"))
    assert response.status == 504
    assert await gateway.balance(org["org_id"]) == Decimal(50)


# -- holds -------------------------------------------------------------------------------------------

async def test_concurrent_requests_never_spend_more_than_the_balance(gateway, simulator):
    org = await gateway.new_org(str(Decimal("0.05") * RATE * 3))  # exactly three clips
    responses = await asyncio.gather(*[post_music(gateway, org["api_key"], clip(f"song {i} [sim:latency_ms=50]"))
                                       for i in range(8)])
    statuses = sorted(r.status for r in responses)
    assert statuses == [200] * 3 + [402] * 5
    assert await gateway.balance(org["org_id"]) == 0
    assert len(await upstream_calls(gateway, simulator)) == 3


# -- idempotency -----------------------------------------------------------------------------------

async def test_idempotent_retry_returns_the_first_track_without_a_second_call_or_charge(hosted, hosted_org, simulator):
    key = {"Idempotency-Key": "retry-1"}
    first = await (await post_music(hosted, hosted_org["api_key"], clip(), **key)).json()
    second = await (await post_music(hosted, hosted_org["api_key"], clip(), **key)).json()
    assert second == first
    assert len(await upstream_calls(hosted, simulator)) == 1
    assert await hosted.balance(hosted_org["org_id"]) == Decimal(50) - Decimal("0.05") * RATE


async def test_idempotent_replay_survives_a_restart(make_gateway, s3_config, simulator):
    gateway = await make_gateway(s3_config)
    org = await gateway.new_org("50")
    first = await (await post_music(gateway, org["api_key"], clip(), **{"Idempotency-Key": "k"})).json()
    restarted = await make_gateway(s3_config)  # a new process view over the same ledger and bucket
    again = await (await post_music(restarted, org["api_key"], clip(), **{"Idempotency-Key": "k"})).json()
    assert again == first
    assert len(await upstream_calls(gateway, simulator)) == 1


async def test_concurrent_duplicates_wait_for_the_first(gateway, org, simulator):
    key = {"Idempotency-Key": "dup"}
    responses = await asyncio.gather(*[post_music(gateway, org["api_key"], clip("[sim:latency_ms=200]"), **key)
                                       for _ in range(4)])
    bodies = [await r.json() for r in responses]
    assert all(r.status == 200 for r in responses) and len({b["id"] for b in bodies}) == 1
    assert len(await upstream_calls(gateway, simulator)) == 1


async def test_a_generation_that_outlives_its_lease_is_504_and_stores_nothing(hosted, hosted_org, s3_client,
                                                                              s3_bucket):
    hosted.server.app[MUSIC].idempotency._lease_s = 0.2  # shorter than the upstream call
    response = await post_music(hosted, hosted_org["api_key"], clip("[sim:latency_ms=400]"),
                                **{"Idempotency-Key": "late"})
    assert response.status == 504
    assert await hosted.balance(hosted_org["org_id"]) == Decimal(50)
    assert await count_objects(s3_client, s3_bucket) == 0  # no object that no ledger event names


async def test_same_key_with_another_body_is_409(gateway, org):
    key = {"Idempotency-Key": "k2"}
    assert (await post_music(gateway, org["api_key"], clip("one"), **key)).status == 200
    response = await post_music(gateway, org["api_key"], clip("two"), **key)
    assert response.status == 409 and (await response.json())["error"]["param"] == "Idempotency-Key"


async def test_keys_are_scoped_to_the_org(gateway, simulator):
    a, b = await gateway.new_org("50"), await gateway.new_org("50")
    first = await (await post_music(gateway, a["api_key"], clip(), **{"Idempotency-Key": "shared"})).json()
    other = await (await post_music(gateway, b["api_key"], clip(), **{"Idempotency-Key": "shared"})).json()
    assert first["id"] != other["id"] and len(await upstream_calls(gateway, simulator)) == 2


async def test_ledger_verifies_after_music_traffic(hosted, hosted_org):
    await _generate_hosted(hosted, hosted_org)
    await post_music(hosted, hosted_org["api_key"], clip("[sim:status=500]"))
    await post_music(hosted, hosted_org["api_key"], clip(), **{"Idempotency-Key": "v"})
    checked, problems = await audit.verify(hosted.ledger.recorder)
    assert problems == [] and checked > 5


async def test_a_free_music_model_generates_with_no_hold_and_no_charge(make_gateway, config, tmp_path):
    """An operator's catalogue may price a music model at 0: nothing to hold (the ledger refuses
    a hold of nothing), nothing charged."""
    shipped = json.loads(SHIPPED_PATH.read_text())
    free = []
    for record in shipped["data"]:
        if record["id"] == "tune-3-clip-preview":
            record["pricing"]["audio_music_per_generation"] = "0"
            for provider in record["providers"]:
                provider["pricing"]["audio_music_per_generation"] = "0"
            free.append(record)
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps({"data": free}))
    gateway = await make_gateway(msgspec.structs.replace(
        config, catalogue=msgspec.structs.replace(config.catalogue, path=str(path))))
    org = await gateway.new_org("1")
    response = await post_music(gateway, org["api_key"], clip())
    assert response.status == 200, await response.text()
    assert decimal_json(await response.read())["usage"]["cost_inr"] == 0
    assert await gateway.balance(org["org_id"]) == Decimal("1")
    assert not [r for r in await gateway.events() if isinstance(r.event, CreditsHeld)]
