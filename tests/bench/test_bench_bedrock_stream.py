"""The Bedrock stream benchmark (`python -m bench.bedrock_stream`) works end to end: one fake
upstream answering OpenAI's SSE and Bedrock's event stream, one real `gateway serve` with both
providers, bench.streams in its own process, then the in-process readers. Only what it reports is
checked, never how fast anything was."""

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.bedrock_stream import PATHS, TITLES
from bench.stream_reading import READ_KIB, READERS

ROOT = Path(__file__).resolve().parents[2]
CHUNKS = 8
# The gateway relays a role chunk, the tokens, a finish chunk and [DONE] on both paths (the usage
# chunk only to a client that asked for it).
EVENTS_PER_STREAM = CHUNKS + 3


def test_openai_and_bedrock_streams_are_measured_side_by_side(tmp_path):
    out = tmp_path / "bedrock_stream.json"
    done = subprocess.run([sys.executable, "-m", "bench.bedrock_stream", "--duration", "0.5", "--rounds", "1",
                           "--chunks", str(CHUNKS), "--mib", "0.05", "--repeats", "1", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=180,
                          env={k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")})
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert result["failures"] == [] and set(result["summary"]) == set(PATHS)
    for path in PATHS:
        [run] = result["runs"][path]
        for load in ("c1", "c32"):
            assert run[load]["ok"] > 0 and run[load]["events"] == EVENTS_PER_STREAM * run[load]["ok"], (path, load)
        assert run["c32"]["cpu_us_per_request"] > 0 and result["summary"][path]["ttft_p50_ms"] > 0
    for reader in READERS:
        reads = result["reading"]["readers"][reader]["reads"]
        assert {str(kib) for kib in READ_KIB} == set(reads) and all(r["items"] > 0 for r in reads.values())
        assert TITLES[reader] in done.stdout
