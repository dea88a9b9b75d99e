"""The audit benchmark (`python -m bench.audit_scale`) works end to end on a small ledger: built
through the append path, verified and replayed by the real `gateway ledger` commands (in one
process and in two, a checkpoint, then from it), scanned raw. Only what it reports is checked,
never how fast anything was."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUESTS, ORGS = 300, 7


def test_a_small_ledger_is_built_verified_replayed_and_scanned(tmp_path):
    out = tmp_path / "audit.json"
    done = subprocess.run([sys.executable, "-m", "bench.audit_scale", "--requests", str(REQUESTS), "--orgs",
                           str(ORGS), "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")})
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert result["requests"] == REQUESTS
    assert result["events"] == 3 * REQUESTS + 3 * ORGS  # hold, charge, release each; org, credits, key per org
    cores = result["cores"]
    assert set(result["runs"]) == {
        "verify, 1 process", f"verify, {cores} processes", "replay, 1 process", f"replay, {cores} processes",
        "replay --projection orgs", "verify --checkpoint", "scan+hash", "scan+decode",
        f"replay, {cores} processes, appending meanwhile", "verify --incremental (1% more)"}
    for run in result["runs"].values():
        assert run["seconds"] > 0 and run["events_per_s"] > 0
        assert run["peak_rss_mb"] > 0 or "appends" in run  # that one is timed from this side
    # what came after the checkpoint: its own event, the appends made during a replay, 1% more requests
    appends = result["runs"][f"replay, {cores} processes, appending meanwhile"]["appends"]
    assert appends >= 1
    assert result["runs"]["verify --incremental (1% more)"]["events"] == 1 + appends + 3 * (REQUESTS // 100)
    assert "| verify, 1 process |" in done.stdout and "bytes per request" in done.stdout
