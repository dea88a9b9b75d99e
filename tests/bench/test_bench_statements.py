"""The statement benchmark (`python -m bench.statements`) works end to end on a small ledger: built
through the append path for one org over January 2025, its statements read in a process of their
own. Only what it reports is checked, never how fast anything was."""

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

from bench import statements
from ledger import charges

ROOT = Path(__file__).resolve().parents[2]
REQUESTS = 2_000


def test_a_small_ledger_is_built_and_its_statements_read(tmp_path):
    out = tmp_path / "statements.json"
    done = subprocess.run([sys.executable, "-m", "bench.statements", "--requests", str(REQUESTS), "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")})
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert result["requests"] == REQUESTS and result["by_key"] == 8
    charged = sum(charges.inr_nano(11_400, Decimal(statements.RATES[(n // 7) % 2])) for n in range(REQUESTS))
    assert Decimal(result["charges_inr"]) * 10**9 == charged  # bench.ledger_append's cost at each request's rate
    assert result["closing_balance_inr"] == result["balance_now_inr"]
    assert set(result["reads"]) == {"statement 2025-01 (JSON)", "statement 2025-01 (CSV)",
                                    "statement 2025-02 (JSON, opening over January)"}
    assert result["process"]["peak_rss_mb"] > 0
