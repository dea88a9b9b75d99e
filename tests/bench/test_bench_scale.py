"""The scale benchmark (`python -m bench.scale`) works end to end: a short run of every kind
against the real fake upstream and a real `gateway serve`, with wrk and the bench's own load
generators in their own processes. Only what it reports is checked, never how fast anything was.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import IN_CI

ROOT = Path(__file__).resolve().parents[2]
EVENTS_PER_STREAM = 16 + 4  # role, 16 tokens, finish, usage, [DONE]
# The gateway passes the usage chunk on only to a client that asked for it (include_usage).
EVENTS_RELAYED = {"direct": EVENTS_PER_STREAM, "floor": EVENTS_PER_STREAM, "sqlite1": EVENTS_PER_STREAM - 1}
HELD = 40


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> dict:
    if shutil.which("wrk") is None:
        message = "wrk is not installed (apt-get install -y wrk; make bench installs it)"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    out = tmp_path_factory.mktemp("bench") / "scale.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.scale", "--configs", "floor,sqlite1", "--runs", "c1,open,stream,hold",
         "--duration", "1", "--rate", "200", "--hold-streams", str(HELD), "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")})
    assert done.returncode == 0, done.stdout + done.stderr
    return {**json.loads(out.read_text()), "printed": done.stdout}


def rows(result: dict) -> dict[str, dict]:
    return {row["config"]: row for row in result["rows"]}


def test_every_run_answers_every_request_and_is_measured(result):
    for name in ("direct", "floor", "sqlite1"):
        runs = rows(result)[name]["runs"]
        assert {"c1", "open", "stream_c1", "stream_c32"} <= runs.keys()
        for run in ("c1", "open", "stream_c1", "stream_c32"):
            assert runs[run]["ok"] > 0 and runs[run]["ok"] == runs[run]["requests"], (name, run, runs[run])
            assert runs[run].get("non_2xx", 0) == runs[run].get("errors", 0) == 0, (name, run, runs[run])
            assert runs[run]["cpu_us_per_request"] > 0, (name, run)
        assert runs["c1"]["p50_ms"] <= runs["c1"]["p99_ms"]


def test_streams_are_counted_event_by_event(result):
    for name in ("direct", "floor", "sqlite1"):
        for run in ("stream_c1", "stream_c32"):
            stream = rows(result)[name]["runs"][run]
            assert stream["events"] == EVENTS_RELAYED[name] * stream["ok"], (name, run, stream)
            assert 0 < stream["ttft_p50_ms"] <= stream["stream_p50_ms"]


def test_open_loop_keeps_its_schedule(result):
    run = rows(result)["direct"]["runs"]["open"]
    assert run["scheduled"] == 200 and run["ok"] == 200 and run["unfinished"] == 0
    assert run["served"] is True and run["achieved_rps"] > 150


def test_the_ledger_holds_one_charge_per_answer_and_verifies(result):
    check = rows(result)["sqlite1"]["ledger"]
    assert check["verify_passed"], check
    assert check["counts_match"] and check["request_completed"] >= check["answered_200"] > 0, check


def test_open_streams_memory_is_measured_in_one_worker(result):
    hold = result["hold"]
    assert hold["streams_open"] == HELD and hold["failed"] == 0, hold
    assert hold["rss_open_kib"] > 0 and hold["kib_per_stream"] is not None


def test_the_table_has_a_row_per_configuration(result):
    lines = [line for line in result["printed"].splitlines() if line.startswith("| ")]
    assert [line.split("|")[1].strip() for line in lines[1:]] == [
        "upstream direct", "bare aiohttp proxy (floor: no auth, ledger, log or metrics)", "SQLite, one process"]
    assert "ledger" not in rows(result)["floor"]  # nothing of the gateway's runs there
    assert "KiB per stream" in result["printed"]
    assert time.strptime(result["finished_at"][:19], "%Y-%m-%dT%H:%M:%S")
