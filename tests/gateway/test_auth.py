"""Authentication over the real socket (DESIGN §3, §7; spec §5): bearer keys, 401 bodies,
keys created or revoked by another process, and keys stored only as SHA-256 digests."""

import asyncio
import hashlib
import re
import secrets
import time

from tests.support import auth, chat_body
from gateway.accounts import admin
from gateway.accounts.keys import KEY_PREFIX, new_id
from ledger.backends import recorder_for

CHAT = "/v1/chat/completions"
HELLO = "hello [sim:tokens=3]"  # a short chat: the simulator answers it with 3 tokens
PROPAGATION_LIMIT_S = 3.0
KEY_SHAPE = re.compile(r"gwk_[A-Za-z0-9_-]{43,}")
MISSING_KEY = {"error": {"message": "missing API key: send 'Authorization: Bearer <key>'",
                         "type": "authentication_error", "code": "invalid_api_key", "param": None}}
BAD_KEY = {"error": {"message": "invalid or revoked API key",
                     "type": "authentication_error", "code": "invalid_api_key", "param": None}}


async def chat_status(gateway, headers: dict[str, str]) -> int:
    response = await gateway.client.post(CHAT, json=chat_body("hi [sim:tokens=1]"), headers=headers)
    await response.read()
    return response.status


async def as_other_process(config, action):
    """Run an admin action on a separate recorder on the same SQLite file, as the CLI would."""
    recorder = recorder_for(config.ledger.url)
    await recorder.open()
    try:
        return await action(recorder)
    finally:
        await recorder.close()


async def seconds_until_status(gateway, headers: dict[str, str], status: int) -> float:
    """Poll until a chat with `headers` answers `status`; the seconds it took (fails after the limit)."""
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < PROPAGATION_LIMIT_S:
        if await chat_status(gateway, headers) == status:
            return elapsed
        await asyncio.sleep(0.05)
    raise AssertionError(f"still not {status} after {PROPAGATION_LIMIT_S} s")


async def test_missing_key_is_401_with_the_error_body(gateway):
    response = await gateway.client.post(CHAT, json=chat_body(HELLO))
    assert response.status == 401
    assert response.content_type == "application/json"
    assert await response.json() == MISSING_KEY


async def test_401_carries_a_request_id(gateway):
    response = await gateway.client.post(CHAT, json=chat_body(HELLO))
    assert response.status == 401
    assert re.fullmatch(r"req_[0-9a-f]{24}", response.headers["X-Request-Id"])


async def test_empty_bearer_is_treated_as_missing(gateway):
    response = await gateway.client.post(CHAT, json=chat_body(HELLO), headers={"Authorization": "Bearer   "})
    assert response.status == 401
    assert await response.json() == MISSING_KEY


async def test_non_bearer_scheme_is_refused(gateway, org):
    response = await gateway.client.post(CHAT, json=chat_body(HELLO),
                                         headers={"Authorization": f"Basic {org['api_key']}"})
    assert response.status == 401
    assert await response.json() == MISSING_KEY


async def test_key_without_a_scheme_is_refused(gateway, org):
    response = await gateway.client.post(CHAT, json=chat_body(HELLO), headers={"Authorization": org["api_key"]})
    assert response.status == 401
    assert await response.json() == MISSING_KEY


async def test_unknown_key_is_401_with_the_error_body(gateway):
    bogus = KEY_PREFIX + secrets.token_urlsafe(32)
    response = await gateway.client.post(CHAT, json=chat_body(HELLO), headers=auth(bogus))
    assert response.status == 401
    assert await response.json() == BAD_KEY


async def test_valid_key_is_accepted(gateway, org):
    assert await chat_status(gateway, auth(org["api_key"])) == 200


async def test_bearer_scheme_is_case_insensitive(gateway, org):
    assert await chat_status(gateway, {"Authorization": f"bearer {org['api_key']}"}) == 200


async def test_x_api_key_header_is_accepted(gateway, org):
    assert await chat_status(gateway, {"x-api-key": org["api_key"]}) == 200


async def test_unknown_x_api_key_is_refused(gateway):
    response = await gateway.client.post(CHAT, json=chat_body(HELLO), headers={"x-api-key": "gwk_nope"})
    assert response.status == 401
    assert await response.json() == BAD_KEY


async def test_health_needs_no_key(gateway):
    response = await gateway.client.get("/")
    assert response.status == 200


async def test_models_need_no_key(gateway):
    response = await gateway.client.get("/v1/models")
    assert response.status == 200


async def test_unknown_v1_route_needs_a_key(gateway):
    response = await gateway.client.get("/v1/nothing-here")
    assert response.status == 401
    assert await response.json() == MISSING_KEY


async def test_keys_have_the_prefix_and_at_least_32_random_bytes(gateway, org):
    assert KEY_SHAPE.fullmatch(org["api_key"])
    created = await admin.create_key(gateway.ledger.recorder, org["org_id"])
    assert KEY_SHAPE.fullmatch(created["api_key"])
    assert created["api_key"] != org["api_key"]


async def test_revoked_key_is_refused_within_3_s(gateway, config, org):
    headers = auth(org["api_key"])
    assert await chat_status(gateway, headers) == 200
    revoked = await as_other_process(config, lambda r: admin.revoke_key(r, org["key_id"]))
    assert revoked == {"key_id": org["key_id"], "org_id": org["org_id"], "revoked": True}
    await seconds_until_status(gateway, headers, 401)
    response = await gateway.client.post(CHAT, json=chat_body(HELLO), headers=headers)
    assert await response.json() == BAD_KEY


async def test_revoking_one_key_leaves_the_orgs_other_keys_working(gateway, config, org):
    other = await admin.create_key(gateway.ledger.recorder, org["org_id"])
    await gateway.ledger.follower.catch_up()
    await as_other_process(config, lambda r: admin.revoke_key(r, org["key_id"]))
    await seconds_until_status(gateway, auth(org["api_key"]), 401)
    assert await chat_status(gateway, auth(other["api_key"])) == 200


async def test_key_created_in_another_process_works_within_3_s(gateway, config, org):
    created = await as_other_process(config, lambda r: admin.create_key(r, org["org_id"]))
    await seconds_until_status(gateway, auth(created["api_key"]), 200)


async def test_org_created_in_another_process_works_within_3_s(gateway, config):
    created = await as_other_process(config, lambda r: admin.create_org(r, "elsewhere", "5"))
    await seconds_until_status(gateway, auth(created["api_key"]), 200)


async def test_raw_key_never_reaches_the_database_file_only_its_digest(gateway, config, tmp_path, org):
    extra = await as_other_process(config, lambda r: admin.create_key(r, org["org_id"]))
    assert await chat_status(gateway, auth(org["api_key"])) == 200
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("ledger.db*"))
    assert (tmp_path / "ledger.db").exists()
    for key in (org["api_key"], extra["api_key"]):
        assert key.encode() not in stored
        assert key.removeprefix(KEY_PREFIX).encode() not in stored
        assert hashlib.sha256(key.encode()).hexdigest().encode() in stored


async def test_key_table_holds_the_sha256_hex_of_the_key(gateway, org):
    rows = await gateway.ledger.recorder._fetch(
        "SELECT key_hash, prefix FROM api_keys WHERE key_id = ?", (org["key_id"],))
    assert rows == [(hashlib.sha256(org["api_key"].encode()).hexdigest(), org["api_key"][:10])]


async def test_revocation_recorded_in_another_orgs_stream_does_not_revoke_the_key(gateway):
    from ledger.events import ApiKeyRevoked
    from ledger.recorder import Append
    victim, other = await gateway.new_org("1"), await gateway.new_org("1")
    await gateway.ledger.writer.append(Append(other["org_id"], [ApiKeyRevoked(key_id=victim["key_id"])]))
    response = await gateway.client.post("/v1/chat/completions", json={"model": "gpt-4o-mini",
                                         "messages": [{"role": "user", "content": "x"}]},
                                         headers={"Authorization": f"Bearer {victim['api_key']}"})
    assert response.status == 200


def test_ids_are_time_ordered_and_unique():
    """Ids minted in a later millisecond sort after earlier ones (the ledger's id indexes then
    grow at their right edge); within a millisecond 48 random bits keep them apart."""
    first = [new_id("req") for _ in range(1000)]
    time.sleep(0.002)
    later = new_id("req")
    assert len(set(first)) == 1000 and all(re.fullmatch(r"req_[0-9a-f]{24}", i) for i in first)
    assert later > max(first)
    assert abs(int(later[4:16], 16) - time.time_ns() // 1_000_000) < 1000
