"""The tracing benchmark (`python -m bench.tracing`) works end to end: traces off, on and sampled,
each a real `gateway serve` in front of the fake upstream under wrk, the spans of the traced ones
received by the OTLP sink. Only what it reports is checked, never how fast anything was."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.tracing import MODES
from tests.support import IN_CI

ROOT = Path(__file__).resolve().parents[2]


def test_traces_off_on_and_sampled_are_measured_side_by_side(tmp_path):
    if shutil.which("wrk") is None:
        message = "wrk is not installed (apt-get install -y wrk; make bench installs it)"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    out = tmp_path / "tracing.json"
    done = subprocess.run([sys.executable, "-m", "bench.tracing", "--duration", "1", "--rounds", "1",
                           "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=180,
                          env={k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "OTEL_"))})
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert set(result["summary"]) == set(MODES) and result["exported"]["exports"] > 0
    for mode in MODES:
        [run] = result["runs"][mode]
        assert run["c32"]["ok"] > 0 and run["c32"]["cpu_us_per_request"] > 0 and run["c1"]["non_2xx"] == 0
        assert run["c32"]["loop_us_per_request"] > 0  # the event loop's share, the rest the other threads'
    assert "CPU per request at c=32 against traces off" in done.stdout
