"""The proofs API (issue 40) from outside: an org's admin key proves its own events are leaves of a
published tree head (and only its own), anyone proves one tree head extends another, each proof
checked as RFC 9162 says against the heads GET /v1/ledger/checkpoints publishes; bad queries are
400s naming the parameter, a tree larger than the log's is a 404."""

import base64

import msgspec
import pytest

from gateway.accounts import admin
from ledger import merkle
from ledger.signing import Signer
from tests.support import auth, poll, signing_checkpoints

INCLUSION, CONSISTENCY = "/v1/ledger/proofs/inclusion", "/v1/ledger/proofs/consistency"


@pytest.fixture
async def proving(make_gateway, config, tmp_path):
    return await make_gateway(signing_checkpoints(config, Signer.generate(), tmp_path))


async def heads(gateway, at_least: int, count: int = 1) -> list[dict]:
    """The published tree heads (at least `count`), once the newest covers `at_least` events."""
    async def listed() -> list[dict]:
        return (await (await gateway.client.get("/v1/ledger/checkpoints")).json())["checkpoints"]
    found = await poll(listed, lambda found: len(found) >= count and found[0]["tree_size"] >= at_least, timeout=60)
    assert len(found) >= count and found[0]["tree_size"] >= at_least
    return found


async def events_of(gateway, api_key: str) -> list[dict]:
    response = await gateway.client.get("/v1/ledger/events", headers=auth(api_key))
    return [msgspec.json.decode(line) for line in (await response.read()).splitlines()]


async def get(gateway, path: str, key: str | None = None, **query: int | str):
    response = await gateway.client.get(path, params={k: str(v) for k, v in query.items()},
                                        headers=auth(key) if key else {})
    return response.status, await response.json()


async def test_an_org_proves_its_own_events_are_in_each_tree_head(proving):
    org, other = await proving.new_org("5"), await proving.new_org("7")
    events = await events_of(proving, org["api_key"])
    head = (await heads(proving, events[-1]["position"]))[0]
    root = base64.b64decode(head["root_hash"])
    for event in events:
        status, proof = await get(proving, INCLUSION, org["api_key"], position=event["position"],
                                  size=head["tree_size"])
        assert status == 200 and (proof["leaf_index"], proof["tree_size"]) == (event["position"] - 1,
                                                                                head["tree_size"])
        leaf = merkle.leaf_hash(bytes.fromhex(event["hash"]))
        assert base64.b64decode(proof["leaf_hash"]) == leaf
        merkle.check_inclusion(proof["leaf_index"], head["tree_size"], leaf,
                               [base64.b64decode(node) for node in proof["audit_path"]], root)
    theirs = (await events_of(proving, other["api_key"]))[0]["position"]
    status, body = await get(proving, INCLUSION, org["api_key"], position=theirs, size=head["tree_size"])
    assert status == 404 and body["error"]["param"] == "position"  # another org's event: as if none
    member = await admin.create_key(proving.ledger.recorder, org["org_id"], "member")
    await proving.ledger.follower.catch_up()
    mine = events[0]["position"]
    assert (await get(proving, INCLUSION, member["api_key"], position=mine, size=head["tree_size"]))[0] == 403
    assert (await get(proving, INCLUSION, position=mine, size=head["tree_size"]))[0] == 401


async def test_anyone_proves_a_tree_head_extends_an_older_one(proving):
    await proving.new_org("5")
    first = (await heads(proving, 1))[0]
    await proving.new_org("6")
    newer, *_, older = await heads(proving, first["tree_size"] + 1, count=2)
    status, body = await get(proving, CONSISTENCY, **{"from": older["tree_size"], "to": newer["tree_size"]})
    assert status == 200 and (body["from"], body["to"]) == (older["tree_size"], newer["tree_size"])
    merkle.check_consistency(older["tree_size"], newer["tree_size"], base64.b64decode(older["root_hash"]),
                             base64.b64decode(newer["root_hash"]), [base64.b64decode(p) for p in body["proof"]])
    status, body = await get(proving, CONSISTENCY, **{"from": newer["tree_size"], "to": newer["tree_size"]})
    assert (status, body["proof"]) == (200, [])


@pytest.mark.parametrize(("path", "query", "status", "param"), [
    (CONSISTENCY, {"from": 5, "to": 2}, 400, "from"),
    (CONSISTENCY, {"to": 2}, 400, "from"),
    (CONSISTENCY, {"from": 0, "to": 2}, 400, "from"),
    (CONSISTENCY, {"from": 1, "to": 10**9}, 404, "size"),
    (CONSISTENCY, {"from": "x", "to": 2}, 400, "from"),
    (INCLUSION, {"position": 1}, 400, "size"),
    (INCLUSION, {"position": 10**9, "size": 1}, 404, "position"),
    (INCLUSION, {"size": 1}, 400, "position"),
])
async def test_a_bad_proof_query_is_named(proving, path, query, status, param):
    org = await proving.new_org("5")
    await heads(proving, 1)
    found, body = await get(proving, path, org["api_key"], **query)
    assert (found, body["error"]["param"]) == (status, param)


async def test_a_tree_larger_than_the_log_s_is_404_and_a_position_past_the_size_400(proving):
    org = await proving.new_org("5")
    events = await events_of(proving, org["api_key"])
    head = (await heads(proving, events[-1]["position"]))[0]
    last = events[-1]["position"]
    status, _ = await get(proving, INCLUSION, org["api_key"], position=last, size=head["tree_size"] + 10**6)
    assert status == 404
    if last > 1:
        status, body = await get(proving, INCLUSION, org["api_key"], position=last, size=last - 1)
        assert status == 400 and body["error"]["param"] == "size"
