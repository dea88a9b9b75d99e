"""The transparency-log benchmark (`python -m bench.tlog`) works end to end at tiny sizes: the tree
grown over a ledger and by the in-memory Builder, proofs as library calls and over HTTP from a
real `gateway serve` (each checked by the bench), tree heads recorded and measured beside the old
per-stream checkpoints, and two gateways under wrk, one growing the tree every second. Only
correctness facts are checked, never how fast anything was."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import IN_CI

ROOT = Path(__file__).resolve().parents[2]
EVENTS, ORGS, WIDE_ORGS, SMALL_REQUESTS, LEAVES, PROOFS = 1_500, 5, 60, 10, 1_000, 20
HEADS = 10  # tree heads each ledger is given: what GET /v1/ledger/checkpoints lists by default


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> dict:
    if shutil.which("wrk") is None:
        message = "wrk is not installed (apt-get install -y wrk; make bench installs it)"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    out = tmp_path_factory.mktemp("bench") / "tlog.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.tlog", "--events", str(EVENTS), "--orgs", str(ORGS), "--wide-orgs",
         str(WIDE_ORGS), "--small-requests", str(SMALL_REQUESTS), "--builder-leaves", str(LEAVES), "--proofs",
         str(PROOFS), "--http-proofs", str(PROOFS), "--duration", "1", "--rounds", "1", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
        env={k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")})
    assert done.returncode == 0, done.stdout + done.stderr
    return {**json.loads(out.read_text()), "printed": done.stdout}


def mth(leaves: list[bytes]) -> bytes:
    """RFC 9162's MTH, straight from its definition."""
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def test_the_tree_is_grown_over_every_event_and_the_builder_roots_as_the_rfc(result):
    grown = result["building"]["grow_sqlite"]
    assert grown["events"] == grown["last_position"] == EVENTS and grown["root_matches_rebuild"]
    built = result["building"]["builder"]
    data = [hashlib.sha256(n.to_bytes(8, "big")).digest() for n in range(LEAVES)]
    assert built["events"] == LEAVES and built["root"] == mth(data).hex()
    assert grown["peak_rss_mb"] > 0 and built["peak_rss_mb"] > 0


def test_every_proof_is_asked_and_checked(result):
    big = result["sizes"]["big"]
    for way in ("library", "http"):
        assert result["proofs"][way]["tree_size"] == big["events"]
        for kind in ("inclusion", "consistency"):
            found = result["proofs"][way][kind]
            assert found["count"] == PROOFS and 0 < found["p50_ms"] <= found["p99_ms"]


def test_a_tree_head_does_not_grow_with_streams_the_old_checkpoint_did(result):
    sizes = result["sizes"]
    narrow, wide, big = sizes["streams"], sizes["wide"], sizes["big"]
    assert narrow["streams"] == big["streams"] == ORGS + 1 and wide["streams"] == WIDE_ORGS + 1  # and "$ledger"
    assert all(s["listed"] == HEADS for s in (narrow, wide, big))
    assert result["proofs"]["http"]["listing_bytes"] == big["listing_bytes"]  # computed as the route answers
    heads = [s["head_event_bytes"] for s in (narrow, wide, big, sizes["computed"])]
    assert max(heads) - min(heads) <= 8  # only the sizes' digits differ
    assert wide["old_event_bytes"] - narrow["old_event_bytes"] >= 80 * (WIDE_ORGS - ORGS)
    assert big["old_listing_bytes"] > big["listing_bytes"]


def test_the_gateway_grows_the_tree_only_when_asked_and_its_ledger_holds(result):
    every_second, never = result["cpu"]["1"], result["cpu"]["0"]
    assert every_second["tree_heads"] >= 1 and every_second["tree_size"] > 0
    assert never["tree_heads"] == never["tree_size"] == 0
    for found in (every_second, never):
        assert found["ledger"]["verify_passed"] and found["ledger"]["counts_match"], found["ledger"]
        assert [run["ok"] > 0 and run["cpu_us_per_request"] > 0 for run in found["runs"]] == [True]


def test_the_table_has_every_part(result):
    parts = [line.split("|")[1].strip() for line in result["printed"].splitlines() if line.startswith("| ")]
    assert set(parts[1:]) == {"1. tree building", "2. proofs", "3. checkpoint size", "4. request path"}
