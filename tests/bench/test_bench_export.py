"""The export benchmark (`python -m bench.export_scale`) works end to end on a small ledger: the
org's whole export, a late page and a day of it, and the offline check of the export, each in a
process of its own. Only what it reports is checked, never how fast anything was."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUESTS = 2_000


def test_a_small_ledger_is_exported_and_its_export_checks(tmp_path):
    out = tmp_path / "export.json"
    done = subprocess.run([sys.executable, "-m", "bench.export_scale", "--requests", str(REQUESTS), "--json",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")})
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    events = 3 + 3 * REQUESTS  # the org, its key and credits; a hold, a charge, a release a request
    assert result["export"]["lines"] == result["check"]["events"] == events
    assert result["check"]["requests"] == result["check"]["charges_recomputed"] == REQUESTS
    assert result["parts"]["page of 1000 after a late position"]["lines"] == 1000
    assert 0 < result["parts"]["the day of the middle event"]["lines"] < events
    assert result["export"]["peak_rss_mb"] > 0 and result["check"]["peak_rss_mb"] > 0
