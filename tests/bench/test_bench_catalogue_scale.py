"""The catalogue scale benchmark (`python -m bench.catalogue_scale`) works end to end: the shipped
catalogue and a bigger one, each in a real `gateway serve` in front of the simulator under wrk,
the lookups timed in-process, then a dated catalogue parsed, published, followed and priced by
bench.catalogue_reload in its own process. Only what it reports is checked, never how fast
anything was."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import IN_CI

ROOT = Path(__file__).resolve().parents[2]
MODELS, RELOAD_MODELS = 20, 30


def test_a_big_catalogue_is_served_and_reloaded_side_by_side(tmp_path):
    if shutil.which("wrk") is None:
        message = "wrk is not installed (apt-get install -y wrk; make bench installs it)"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    out = tmp_path / "catalogue_scale.json"
    done = subprocess.run([sys.executable, "-m", "bench.catalogue_scale", "--models", str(MODELS),
                           "--reload-models", str(RELOAD_MODELS), "--duration", "1", "--rounds", "1",
                           "--repeats", "1", "--json", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=180, env={k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")})
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert result["failures"] == []
    shipped, big = result["micro"]["shipped"]["models"], result["micro"]["big"]["models"]
    assert big == shipped + MODELS
    for name in ("shipped", "big"):
        [run] = result["hot"][name]["runs"]
        assert run["ok"] == run["requests"] > 0 and run["cpu_us_per_request"] > 0, (name, run)
        assert result["micro"][name]["resolve_ns"] > 0 and result["micro"][name]["model_cost_ns"] > 0
    reload = result["reload"]
    assert reload["models"] == RELOAD_MODELS and reload["switches"] == 2  # now, and the change a week ahead
    assert reload["traced_retained_bytes"] > 0 and reload["parse_ms"] > 0 and reload["load_ms"] > 0
    # The route serves the same prices whether built, kept or read back (the revision differs in one price).
    assert reload["in_force_first"]["bytes"] == reload["in_force_again"]["bytes"] > 0
    assert reload["past_version"]["bytes"] > 0
    assert f"shipped + {MODELS:,} synthetic" in done.stdout and "| Catalogue.parse |" in done.stdout
