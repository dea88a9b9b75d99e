"""`gateway webhooks ...`, the operator's way to an org's endpoints: the same checks and answers as
/v1/webhooks, a served gateway delivering what the CLI registered, and clear refusals."""

import json
import os
import stat

import msgspec

from tests.gateway.gateway_helpers import run_cli_async, write_config
from tests.gateway.webhooks.receiver import Receiver
from tests.support import poll


def one_object(stdout: str) -> dict:
    [line] = stdout.splitlines()
    return json.loads(line)


async def webhooks_cli(config: str, *args: str) -> dict:
    result = await run_cli_async("webhooks", *args, "--config", config)
    assert result.returncode == 0, result.stderr
    return one_object(result.stdout)


async def test_an_operator_manages_an_orgs_endpoints(tmp_path, make_gateway, config):
    ledger = tmp_path / "ledger.db"
    path = str(write_config(tmp_path, f"""
[ledger]
url = "sqlite:///{ledger}"
[webhooks]
allowed_hosts = ["127.0.0.1"]
allow_http = true
"""))
    receiver = Receiver()
    await receiver.start()
    org = one_object((await run_cli_async("admin", "create-org", "acme", "--config", path)).stdout)
    created = await webhooks_cli(path, "add", org["org_id"], receiver.url, "--events", "credits.added,webhook.test",
                                 "--key-budget-percent", "10,90")
    receiver.secret = created["secret"]
    assert created["events"] == ["credits.added", "webhook.test"] and created["key_budget_percent"] == [10, 90]
    key_file = tmp_path / "ledger.db-webhook-secrets.key"
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600  # no master key: a key file of its own
    listed = await webhooks_cli(path, "list", org["org_id"])
    assert [w["id"] for w in listed["data"]] == [created["id"]] and created["secret"] not in json.dumps(listed)
    assert (await webhooks_cli(path, "disable", org["org_id"], created["id"]))["enabled"] is False
    assert (await webhooks_cli(path, "enable", org["org_id"], created["id"]))["enabled"] is True
    queued = await webhooks_cli(path, "test", org["org_id"], created["id"])

    served = await make_gateway(msgspec.structs.replace(config, ledger=msgspec.structs.replace(
        config.ledger, url=f"sqlite:///{ledger}"), webhooks=msgspec.structs.replace(
        config.webhooks, allowed_hosts=["127.0.0.1"], allow_http=True, poll_interval_s=0.05)))
    await receiver.until(lambda r: r.ids() == [queued["id"]])  # what the CLI queued, the server delivers
    assert receiver.got[0]["signed"] and receiver.got[0]["body"]["type"] == "webhook.test"
    shown = await poll(lambda: _delivered(path, org["org_id"], created["id"]))
    assert shown["deliveries"][0]["message_id"] == queued["id"]
    assert (await webhooks_cli(path, "remove", org["org_id"], created["id"]))["deleted"] is True
    assert served and (await webhooks_cli(path, "list", org["org_id"]))["data"] == []
    await receiver.stop()
    exported = tmp_path / "export.ndjson"  # the endpoint's events are in the org's export, and check
    assert (await run_cli_async("ledger", "export", org["org_id"], "--out", str(exported), "--config", path)
            ).returncode == 0
    assert b'"webhook_attempted"' in exported.read_bytes() and created["secret"].encode() not in exported.read_bytes()
    checked = await run_cli_async("ledger", "check-export", str(exported))
    assert checked.returncode == 0, checked.stderr


async def _delivered(path: str, org_id: str, webhook_id: str) -> dict | None:
    shown = await webhooks_cli(path, "show", org_id, webhook_id)
    return shown if shown["deliveries"] and shown["deliveries"][0]["delivered"] else None


async def test_refusals_name_the_problem(tmp_path):
    path = str(write_config(tmp_path, f'[ledger]\nurl = "sqlite:///{tmp_path}/ledger.db"\n'))
    org = one_object((await run_cli_async("admin", "create-org", "acme", "--config", path)).stdout)
    for args, says in ((("add", "org_nope", "https://93.184.216.34/", "--events", "credits.added"), "no organization"),
                       (("add", org["org_id"], "https://93.184.216.34/", "--events", "credit.added"), "events"),
                       (("add", org["org_id"], "https://127.0.0.1/", "--events", "credits.added"), "127.0.0.1"),
                       (("add", org["org_id"], "http://93.184.216.34/", "--events", "credits.added"), "https"),
                       (("show", org["org_id"], "wh_nope"), "no webhook wh_nope")):
        result = await run_cli_async("webhooks", *args, "--config", path)
        assert result.returncode == 1 and says in result.stderr, (args, result.stderr)
