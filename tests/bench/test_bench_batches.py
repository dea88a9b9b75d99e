"""The batch benchmark (`python -m bench.batches`) works end to end with tiny sizes: the simulator and
real `gateway serve` processes, a batch on each path (gateway-run and native) sent with the openai
SDK, then a batch of slow lines (the simulator's latency directive) whose gateway is SIGKILLed
mid-batch and started again. Only correctness is checked, never how fast anything was: every
custom_id once across the output and error files, each line charged once, the ledger verifies,
and a native batch was created upstream once. Each wait in the benchmark has a deadline."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINES, KILL_LINES = 40, 200
SLOW = "[sim:latency_ms=100]"  # 200 lines 8 at a time: ~2.5 s, so the kill lands mid-batch


def test_batches_are_measured_and_survive_kill9(tmp_path):
    out = tmp_path / "batches.json"
    done = subprocess.run([sys.executable, "-m", "bench.batches", "--sizes", str(LINES), "--concurrency", "8",
                           "--kill-lines", str(KILL_LINES), "--kill-text", SLOW, "--deadline", "120",
                           "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")})
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert result["failures"] == []
    rows = {(row["path"], row["kill"]): row for row in result["rows"]}
    assert set(rows) == {(path, kill) for path in ("gateway-run", "native") for kill in (False, True)}
    for (path, kill), row in rows.items():
        lines = KILL_LINES if kill else LINES
        assert row["status"] == "completed" and row["lines"] == lines, (path, kill)
        assert row["files"]["ok"] and row["files"]["named"] == lines, (path, kill, row["files"])
        assert row["charged_once"]["ok"] and row["charged_once"]["events"] == row["recorded"] == lines, (path, kill)
        assert row["verify_passed"], (path, kill, row["verify_output"])
        assert row["upstream_batches"] == (1 if path == "native" else 0), (path, kill)
    assert rows["native", True]["kills"][0]["moment"].startswith("BatchSubmitted")
    assert "| gateway-run, kill -9 (1x) |" in done.stdout
