"""The transparency log checked by someone else's code: the Go checksum database's own verifiers
(golang.org/x/mod/sumdb/note for the signed notes, sumdb/tlog for RFC 6962/9162 proofs), run by
tests/ledger/tlogverify on what the gateway publishes (its tree heads, its inclusion and
consistency proofs over HTTP) and on every proof ledger.merkle makes for trees of many sizes.

They need Debian's golang-go and golang-golang-x-mod-dev (`make tlog-go` installs both): without
them the tests skip, and fail when CI=true. The program is built in GOPATH mode from Debian's
sources: no module download, no network.
"""

import asyncio
import base64
import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import msgspec
import pytest

from gateway.accounts import admin
from ledger import merkle, notes, signing, tree
from ledger.signing import Signer
from tests.support import IN_CI, auth, poll, signing_checkpoints

openai = pytest.importorskip("openai")

GOPATH = Path("/usr/share/gocode")
SUMDB = GOPATH / "src" / "golang.org" / "x" / "mod" / "sumdb"
SOURCE = Path(__file__).resolve().parent / "tlogverify"
ORIGIN = "tlog-go.test/ledger"
DEADLINE_S = 60.0  # for waits on a tree head: generous, a loaded machine is slow, not wrong
CHECKPOINTS, EVENTS = "/v1/ledger/checkpoints", "/v1/ledger/events"
INCLUSION, CONSISTENCY = "/v1/ledger/proofs/inclusion", "/v1/ledger/proofs/consistency"


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


def go_env(cache: Path) -> dict[str, str]:
    """GOPATH mode on Debian's sources, offline, with a build cache of the test's own."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("GO")}
    return {**env, "GO111MODULE": "off", "GOPATH": str(GOPATH), "GOPROXY": "off", "GOFLAGS": "",
            "GOCACHE": str(cache), "CGO_ENABLED": "0"}


@pytest.fixture(scope="session")
def tlogverify(tmp_path_factory) -> Path:
    """tests/ledger/tlogverify, built (skips locally, fails under CI=true, without Go or x/mod)."""
    go = shutil.which("go")
    if go is None:
        _unavailable("`go` is not on PATH: the Go verifier tests need Debian's golang-go (make tlog-go)")
    for package in ("note", "tlog"):
        if not (SUMDB / package / f"{package}.go").is_file():
            _unavailable(f"{SUMDB / package} is missing: the Go verifier tests need Debian's "
                         "golang-golang-x-mod-dev (make tlog-go)")
    out = tmp_path_factory.mktemp("tlogverify")
    built = subprocess.run([go, "build", "-o", str(out / "tlogverify"), "."], cwd=SOURCE,
                           env=go_env(out / "cache"), capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, f"building tests/ledger/tlogverify failed:\n{built.stderr}"
    return out / "tlogverify"


def run_go(binary: Path, document: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary)], input=json.dumps(document), capture_output=True, text=True, timeout=120)


def accepted(binary: Path, document: dict) -> dict:
    result = run_go(binary, document)
    assert result.returncode == 0, f"the Go verifier rejected it: {result.stderr}"
    return json.loads(result.stdout)


def rejected(binary: Path, document: dict, *words: str) -> str:
    """The Go verifier's complaint, which must name each of `words`."""
    result = run_go(binary, document)
    assert result.returncode == 1, f"the Go verifier accepted it ({result.returncode}): {result.stdout}"
    assert all(word in result.stderr for word in words), result.stderr
    return result.stderr


def b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


def flipped(b64_hash: str) -> str:
    raw = bytearray(base64.b64decode(b64_hash))
    raw[7] ^= 0x10
    return b64(bytes(raw))


# -- every proof ledger.merkle makes, for trees of many sizes -------------------------------------

SIZES = sorted({*range(1, 71), 95, 100, 127, 128, 129, 160, 200, 255, 256, 257, 300})


def proofs_of_a_tree(rng: random.Random, size: int) -> tuple[list[dict], list[dict]]:
    """A tree of `size` random leaves grown with ledger.tree.Builder (its roots at every size);
    every leaf's inclusion proof in it, and the consistency proof of each size from 1 to `size`."""
    data = [rng.randbytes(32) for _ in range(size)]
    leaves = [merkle.leaf_hash(d) for d in data]
    builder, roots = tree.Builder(), {}
    for leaf in leaves:
        builder.add(leaf)
        roots[builder.size] = builder.root()

    def hashes_of(nodes: list[merkle.Node]) -> dict[merkle.Node, bytes]:
        return {(level, index): tree.subtree(b"".join(leaves[index << level:(index + 1) << level]))
                for level, index in nodes}

    assert merkle.prove([(0, size)], hashes_of) == [roots[size]]  # the builder and the ranges agree
    inclusion = [{"tree_size": size, "leaf_index": index, "leaf_data": b64(data[index]),
                  "leaf_hash": b64(leaves[index]), "root_hash": b64(roots[size]),
                  "audit_path": [b64(node) for node in merkle.prove(merkle.inclusion_ranges(index, size), hashes_of)]}
                 for index in range(size)]
    consistency = [{"from": old, "to": size, "from_root": b64(roots[old]), "to_root": b64(roots[size]),
                    "proof": [] if old == size else
                    [b64(node) for node in merkle.prove(merkle.consistency_ranges(old, size), hashes_of)]}
                   for old in range(1, size + 1)]
    return inclusion, consistency


async def test_go_accepts_every_proof_ledger_merkle_makes(tlogverify):
    rng = random.Random(9162)
    inclusion, consistency = [], []
    for size in SIZES:
        included, consistent = proofs_of_a_tree(rng, size)
        inclusion += included
        consistency += consistent
    report = await asyncio.to_thread(accepted, tlogverify, {"verifier_key": "", "notes": [], "inclusion": inclusion,
                                                            "consistency": consistency})
    assert report["inclusion_proofs_verified"] == len(inclusion) == sum(SIZES)
    assert report["consistency_proofs_verified"] == len(consistency) == sum(SIZES)

    # What it accepts it does not accept for another leaf, tree shape or root (the checks bite). (An
    # audit path binds no size beyond the tree's shape: leaf 137's is the same in 299 leaves as in
    # 300; the signed note is what states the size.)
    leaf = next(p for p in inclusion if p["tree_size"] == 300 and p["leaf_index"] == 137)
    for wrong in ({"leaf_index": 138}, {"tree_size": 256}, {"leaf_data": b64(rng.randbytes(32)), "leaf_hash": ""},
                  {"root_hash": flipped(leaf["root_hash"])}):
        await asyncio.to_thread(rejected, tlogverify, {"inclusion": [{**leaf, **wrong}]}, "tlog.CheckRecord")
    step = next(p for p in consistency if (p["from"], p["to"]) == (100, 300))
    for wrong in ({"from": 101}, {"to_root": flipped(step["to_root"])}, {"proof": step["proof"][:-1]}):
        await asyncio.to_thread(rejected, tlogverify, {"consistency": [{**step, **wrong}]}, "tlog.CheckTree")


# -- what a real gateway publishes ----------------------------------------------------------------

@pytest.fixture
def signer() -> Signer:
    return Signer.generate()


@pytest.fixture
async def signing_gateway(make_gateway, config, signer, tmp_path):
    return await make_gateway(signing_checkpoints(config, signer, tmp_path, log_origin=ORIGIN))


async def traffic(gateway, orgs: list[dict], credits_each: int) -> int:
    """A few chat requests through the openai SDK for the first org, then credits added to every
    org straight through the ledger; the log's last position."""
    client = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=orgs[0]["api_key"], max_retries=0)
    for tokens in (3, 5, 8):
        await client.chat.completions.create(model="gpt-4o-mini",
                                             messages=[{"role": "user", "content": f"hi [sim:tokens={tokens}]"}])
    for _ in range(credits_each):
        for org in orgs:
            await admin.add_credits(gateway.ledger.recorder, org["org_id"], "1")
    return (await gateway.ledger.recorder.read(0, 1_000_000))[-1].position


async def tree_head_covering(gateway, position: int) -> dict:
    """The newest tree head once one covers `position` (polling GET /v1/ledger/checkpoints)."""
    async def published() -> dict:
        response = await gateway.client.get(CHECKPOINTS, params={"limit": "100"})
        assert response.status == 200, await response.text()
        return await response.json()
    body = await poll(published, lambda body: body["checkpoints"] and body["checkpoints"][0]["tree_size"] >= position,
                      timeout=DEADLINE_S)
    assert body["checkpoints"] and body["checkpoints"][0]["tree_size"] >= position, \
        f"no tree head covering position {position} within {DEADLINE_S} s"
    return body


async def get(gateway, path: str, key: str | None = None, **params: int) -> dict:
    response = await gateway.client.get(path, params={k: str(v) for k, v in params.items()},
                                        headers=auth(key) if key else {})
    assert response.status == 200, await response.text()
    return await response.json()


async def test_go_verifies_the_gateway_s_signed_tree_heads_and_proofs(signing_gateway, signer, tlogverify):
    gateway = signing_gateway
    orgs = [await gateway.new_org("100") for _ in range(4)]
    first = await tree_head_covering(gateway, await traffic(gateway, orgs, 40))
    body = await tree_head_covering(gateway, await traffic(gateway, orgs, 40))
    heads = sorted({head["tree_size"]: head for head in body["checkpoints"]}.values(), key=lambda h: h["tree_size"])
    assert len(heads) >= 2 and heads[-1]["tree_size"] > first["checkpoints"][0]["tree_size"] >= 160
    [key] = body["public_keys"]
    assert key["current"] and key["key_id"] == signer.key_id
    verifier_key = notes.verifier_key(ORIGIN, signing.public_raw(key["public_key_pem"].encode()))

    # The first org's events (its chat requests' among them), each under every tree head covering it.
    org = orgs[0]
    response = await gateway.client.get(EVENTS, headers=auth(org["api_key"]))
    assert response.status == 200, await response.text()
    events = [msgspec.json.decode(line) for line in (await response.read()).splitlines()]
    chosen = [events[0], events[1], *events[2:-1:9], events[-1]]
    assert len(chosen) >= 6
    inclusion = []
    for head in heads:
        for event in (e for e in chosen if e["position"] <= head["tree_size"]):
            proof = await get(gateway, INCLUSION, org["api_key"], position=event["position"], size=head["tree_size"])
            assert (proof["tree_size"], proof["leaf_index"]) == (head["tree_size"], event["position"] - 1)
            inclusion.append({"tree_size": head["tree_size"], "leaf_index": proof["leaf_index"],
                              "leaf_data": b64(bytes.fromhex(event["hash"])), "leaf_hash": proof["leaf_hash"],
                              "audit_path": proof["audit_path"], "root_hash": head["root_hash"]})
    # Between every two tree heads (and from the newest to itself), with no key at all.
    consistency = []
    for i, old in enumerate(heads):
        for new in heads[i:] if old is heads[-1] else heads[i + 1:]:
            proof = await get(gateway, CONSISTENCY, **{"from": old["tree_size"], "to": new["tree_size"]})
            assert (proof["from"], proof["to"]) == (old["tree_size"], new["tree_size"])
            consistency.append({"from": old["tree_size"], "to": new["tree_size"], "proof": proof["proof"],
                                "from_root": old["root_hash"], "to_root": new["root_hash"]})

    document = {"verifier_key": verifier_key, "notes": [head["note"] for head in heads], "inclusion": inclusion,
                "consistency": consistency}
    report = await asyncio.to_thread(accepted, tlogverify, document)
    assert [(c["origin"], c["size"], c["root"]) for c in report["checkpoints"]] == \
        [(ORIGIN, head["tree_size"], head["root_hash"]) for head in heads]
    assert all(c["signer"] == ORIGIN and c["extensions"][0].startswith("time ") for c in report["checkpoints"])
    assert report["inclusion_proofs_verified"] == len(inclusion) > len(chosen)  # some under several heads
    assert report["consistency_proofs_verified"] == len(consistency) == len(heads) * (len(heads) - 1) // 2 + 1
    assert report["roots_bound_to_a_note"] == len(inclusion) + 2 * len(consistency)  # every root a signed one

    # A note whose size line was changed: its signature no longer holds.
    head = heads[-1]
    lines = head["note"].split("\n")
    assert lines[1] == str(head["tree_size"])
    forged = "\n".join([lines[0], str(head["tree_size"] + 1), *lines[2:]])
    await asyncio.to_thread(rejected, tlogverify, {"verifier_key": verifier_key, "notes": [forged]},
                            "notes[0]", "note.Open")
    # A note checked with another key of the same name: no signature it can verify.
    other = Signer.generate()
    await asyncio.to_thread(rejected, tlogverify,
                            {"verifier_key": notes.verifier_key(ORIGIN, other.public_raw), "notes": [head["note"]]},
                            "notes[0]", "note.Open")
    # An audit path with one node flipped.
    proof = max(inclusion, key=lambda p: len(p["audit_path"]))
    path = list(proof["audit_path"])
    path[len(path) // 2] = flipped(path[len(path) // 2])
    await asyncio.to_thread(rejected, tlogverify, {"inclusion": [{**proof, "audit_path": path}]}, "tlog.CheckRecord")
    # A consistency proof held against a different old root (another tree head's, a real root).
    step = next(c for c in consistency if c["from"] != c["to"])
    await asyncio.to_thread(rejected, tlogverify, {"consistency": [{**step, "from_root": step["to_root"]}]},
                            "tlog.CheckTree")
    # With the signed notes given, a root that is not the one signed for its size is refused too.
    await asyncio.to_thread(rejected, tlogverify, {**document, "consistency": [{**step, "from_root": step["to_root"]}]},
                            "is not the root", "signed note")
