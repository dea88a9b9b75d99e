"""The ledger commands of issue 28 as an operator and a customer run them: `gateway ledger
export`, `check-export` (no database, no configuration), `keygen`, and `verify --incremental`
signing its checkpoint with `[ledger] signing_key`."""

import json
import os
import stat
import subprocess
import sys

import msgspec

from ledger import signing
from tests.gateway.gateway_helpers import ledger_toml, run_cli, write_config
from tests.support import clean_env


def ok(*args: str, **options) -> dict:
    result = run_cli(*args, **options)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_an_operator_exports_an_org_and_anyone_checks_it_offline(tmp_path):
    key = tmp_path / "signing.pem"
    made = ok("ledger", "keygen", "--out", str(key))
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600 and made["key_id"]
    assert signing.key_id(signing.public_raw(made["public_key_pem"].encode())) == made["key_id"]
    assert run_cli("ledger", "keygen", "--out", str(key)).returncode == 1  # never over an existing key
    cfg = str(write_config(tmp_path, ledger_toml(tmp_path / "ledger.db", f'signing_key = "{key}"\n')))
    org = ok("admin", "create-org", "acme", "--credits-inr", "12.5", "--config", cfg)
    ok("admin", "create-org", "other", "--credits-inr", "1", "--config", cfg)
    ok("admin", "add-credits", org["org_id"], "0.25", "--config", cfg)
    verified = ok("ledger", "verify", "--incremental", "--config", cfg)
    assert verified["ok"] and verified["checkpoint_position"]

    out = tmp_path / "acme.ndjson"
    assert run_cli("ledger", "export", org["org_id"], "--out", str(out), "--config", cfg).returncode == 0
    printed = run_cli("ledger", "export", org["org_id"], "--config", cfg).stdout
    assert printed.encode() == out.read_bytes() and len(printed.splitlines()) == 4
    # A stranger's machine: no configuration anywhere, and a GATEWAY_* setting that would break one.
    stranger = clean_env(GATEWAY_LEDGER__URL="nonsense://", GATEWAY_LEDGER_URL="nonsense://")
    report = ok("ledger", "check-export", str(out), env=stranger, cwd=tmp_path)
    assert report["balance_inr"] == "12.75" and report["events"] == 4

    tampered = out.read_bytes().replace(b'"amount_inr_nano":250000000', b'"amount_inr_nano":350000000')
    (tmp_path / "tampered.ndjson").write_bytes(tampered)
    failed = run_cli("ledger", "check-export", str(tmp_path / "tampered.ndjson"), env=stranger)
    assert failed.returncode == 1 and failed.stdout == ""
    assert "line 4, position 7: its hash is not the SHA-256" in failed.stderr
    module = subprocess.run([sys.executable, "-m", "ledger.export_check", str(out)], capture_output=True,
                            text=True, env=stranger, cwd=tmp_path, timeout=60)  # the package alone, no gateway
    assert module.returncode == 0 and json.loads(module.stdout) == report


def test_export_refuses_an_unknown_org_and_a_malformed_time(tmp_path):
    cfg = str(write_config(tmp_path, ledger_toml(tmp_path / "ledger.db")))
    org = ok("admin", "create-org", "acme", "--config", cfg)
    unknown = run_cli("ledger", "export", "org_nobody", "--config", cfg)
    assert unknown.returncode == 1 and "org_nobody" in unknown.stderr
    bad = run_cli("ledger", "export", org["org_id"], "--from", "last tuesday", "--config", cfg)
    assert bad.returncode == 1 and "'last tuesday' is not an ISO 8601 time" in bad.stderr
    later = run_cli("ledger", "export", org["org_id"], "--from", "2999-01-01T00:00:00Z", "--config", cfg)
    assert later.returncode == 0 and later.stdout == ""


def test_check_export_names_a_missing_file_and_a_bad_checkpoints_file(tmp_path):
    missing = run_cli("ledger", "check-export", str(tmp_path / "none.ndjson"))
    assert missing.returncode == 1 and "none.ndjson" in missing.stderr
    (tmp_path / "e.ndjson").write_bytes(b"")
    (tmp_path / "c.json").write_text('{"checkpoints": [{"position": "x"}]}')
    bad = run_cli("ledger", "check-export", str(tmp_path / "e.ndjson"), "--checkpoints", str(tmp_path / "c.json"))
    assert bad.returncode == 1 and "position" in bad.stderr


def test_a_signing_key_that_is_not_one_is_refused_by_name(tmp_path):
    (tmp_path / "bad.pem").write_text("not a key")
    cfg = str(write_config(tmp_path, ledger_toml(tmp_path / "ledger.db", f'signing_key = "{tmp_path}/bad.pem"\n')))
    ok("admin", "create-org", "acme", "--config", cfg)
    refused = run_cli("ledger", "verify", "--checkpoint", "--config", cfg)
    assert refused.returncode == 1 and "private key" in refused.stderr
    assert msgspec.json.decode(run_cli("ledger", "verify", "--config", cfg).stdout)["ok"]


def test_a_server_with_a_signing_key_it_cannot_read_does_not_start(tmp_path):
    cfg = str(write_config(tmp_path, ledger_toml(tmp_path / "ledger.db", f'signing_key = "{tmp_path}/none.pem"\n')))
    refused = run_cli("serve", "--port", "0", "--config", cfg, timeout=30)
    assert refused.returncode == 2 and "ledger.signing_key" in refused.stderr and "none.pem" in refused.stderr
