"""The `gateway` command as a user runs it (DESIGN §7): admin and ledger commands, serve, demo."""

import asyncio
import contextlib
import json
import os
import re
import signal
import sqlite3
import time
from decimal import Decimal
from pathlib import Path

import aiohttp
import msgspec
import pytest

from gateway.catalogue import SHIPPED_PATH
from ledger.recorder import SCHEMA_VERSION
from tests.ledger.ledger_helpers import run_sql
from tests.support import PROVIDER_KEY, auth, chat_body, decimal_json, request_events
from tests.gateway.gateway_helpers import (
    children_of, clean_env, cmdline, count_events, gateway_process, is_running,
    json_lines, ledger_toml, one_json_object, port_is_open, run_cli, run_cli_async, write_config,
)

ORG_ID = re.compile(r"org_[0-9a-f]{24}")
KEY_ID = re.compile(r"key_[0-9a-f]{24}")
API_KEY = re.compile(r"gwk_[A-Za-z0-9_-]{43,}")


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def cfg(tmp_path, db) -> str:
    return str(write_config(tmp_path, ledger_toml(db)))


def ok(*args: str) -> dict:
    """Run a command that must succeed and print one JSON object; return it (numbers exact)."""
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    one_json_object(result.stdout)
    return decimal_json(result.stdout.encode())


def fails(*args: str) -> str:
    """Run a command that must fail without output on stdout; return its stderr."""
    result = run_cli(*args)
    assert result.returncode != 0
    assert result.stdout == ""
    return result.stderr


def new_org(cfg: str, *extra: str) -> dict:
    return ok("admin", "create-org", "acme", *extra, "--config", cfg)


# --- admin commands -------------------------------------------------------------------------


def test_create_org_prints_org_id_and_api_key(cfg):
    org = new_org(cfg)
    assert ORG_ID.fullmatch(org["org_id"])
    assert API_KEY.fullmatch(org["api_key"])


def test_create_org_with_config_before_the_command(cfg):
    org = ok("--config", cfg, "admin", "create-org", "acme")
    assert ORG_ID.fullmatch(org["org_id"])
    assert API_KEY.fullmatch(org["api_key"])


def test_create_org_with_opening_credits_sets_the_balance(cfg):
    org = new_org(cfg, "--credits-inr", "100.5")
    balance = ok("admin", "balance", org["org_id"], "--config", cfg)
    assert balance["org_id"] == org["org_id"]
    assert balance["balance_inr"] == Decimal("100.5")


def test_create_org_without_credits_has_zero_balance(cfg):
    org = new_org(cfg)
    assert ok("admin", "balance", org["org_id"], "--config", cfg)["balance_inr"] == 0


def test_create_key_prints_key_id_and_api_key(cfg):
    org = new_org(cfg)
    key = ok("--config", cfg, "admin", "create-key", org["org_id"])
    assert KEY_ID.fullmatch(key["key_id"])
    assert API_KEY.fullmatch(key["api_key"])
    assert key["api_key"] != org["api_key"]


def test_create_key_with_config_between_admin_and_action(cfg):
    org = new_org(cfg)
    key = ok("admin", "--config", cfg, "create-key", org["org_id"])
    assert KEY_ID.fullmatch(key["key_id"])


def test_balance_is_an_exact_json_number_after_add_credits(cfg):
    org = new_org(cfg, "--credits-inr", "100.5")
    added = ok("admin", "add-credits", org["org_id"], "0.25", "--config", cfg)
    assert added["balance_inr"] == Decimal("100.75")
    result = run_cli("--config", cfg, "admin", "balance", org["org_id"])
    assert result.returncode == 0
    balance = one_json_object(result.stdout)
    assert '"balance_inr":100.75' in result.stdout.replace(" ", "")  # a number, not a string
    assert set(balance) >= {"org_id", "balance_inr"}
    assert decimal_json(result.stdout.encode())["balance_inr"] == Decimal("100.75")


def test_add_credits_keeps_nine_decimal_places_exactly(cfg):
    org = new_org(cfg, "--credits-inr", "0.1")
    ok("admin", "add-credits", org["org_id"], "0.000000002", "--config", cfg)
    assert ok("admin", "balance", org["org_id"], "--config", cfg)["balance_inr"] == Decimal("0.100000002")


def test_revoke_key_prints_the_revoked_key(cfg):
    org = new_org(cfg)
    key = ok("admin", "create-key", org["org_id"], "--config", cfg)
    revoked = ok("admin", "revoke-key", key["key_id"], "--config", cfg)
    assert revoked == {"key_id": key["key_id"], "org_id": org["org_id"], "revoked": True}


def test_revoking_twice_succeeds_and_writes_one_event(cfg, db):
    org = new_org(cfg)
    ok("admin", "revoke-key", org["key_id"], "--config", cfg)
    events = count_events(db)
    ok("admin", "revoke-key", org["key_id"], "--config", cfg)
    assert count_events(db) == events


def test_set_retention_prints_the_new_mode(cfg):
    org = new_org(cfg)
    assert ok("admin", "set-retention", org["org_id"], "none", "--config", cfg) == \
        {"org_id": org["org_id"], "retention": "none"}


def test_create_org_with_retention_none(cfg, db):
    new_org(cfg, "--retention", "none")
    with contextlib.closing(sqlite3.connect(db)) as connection:
        assert connection.execute("SELECT retention FROM orgs").fetchall() == [("none",)]


# --- bad input: non-zero exit, clear message, no event --------------------------------------


@pytest.mark.parametrize("command", [
    ("balance", "org_nope"),
    ("add-credits", "org_nope", "5"),
    ("create-key", "org_nope"),
    ("set-retention", "org_nope", "none"),
])
def test_unknown_org_is_refused(cfg, db, command):
    new_org(cfg)
    events = count_events(db)
    assert fails("admin", *command, "--config", cfg) == "gateway: error: no organization org_nope\n"
    assert count_events(db) == events


def test_unknown_key_cannot_be_revoked(cfg, db):
    new_org(cfg)
    events = count_events(db)
    assert fails("admin", "revoke-key", "key_nope", "--config", cfg) == "gateway: error: no key key_nope\n"
    assert count_events(db) == events


@pytest.mark.parametrize(("amount", "message"), [
    ("-5", "gateway: error: amount must be positive, got -5\n"),
    ("0", "gateway: error: amount must be positive, got 0\n"),
    ("abc", "gateway: error: not a decimal amount: 'abc'\n"),
    ("NaN", "gateway: error: not a finite amount: 'NaN'\n"),
    ("Infinity", "gateway: error: not a finite amount: 'Infinity'\n"),
    ("0.0000000001", "gateway: error: amount 0.0000000001 has more than 9 decimal places\n"),
])
def test_bad_credit_amount_is_refused_without_an_event(cfg, db, amount, message):
    org = new_org(cfg, "--credits-inr", "10")
    events = count_events(db)
    assert fails("admin", "add-credits", org["org_id"], amount, "--config", cfg) == message
    assert count_events(db) == events


@pytest.mark.parametrize("amount", ["1000000000.000000001", "1e30", "1e400"])
def test_credit_amount_above_the_limit_is_refused(cfg, db, amount):
    org = new_org(cfg)
    events = count_events(db)
    assert fails("admin", "add-credits", org["org_id"], amount, "--config", cfg) == \
        f"gateway: error: amount {amount} is above the limit of 1000000000 INR per operation\n"
    assert count_events(db) == events


def test_credit_amount_at_the_limit_is_accepted(cfg):
    org = new_org(cfg)
    added = ok("admin", "add-credits", org["org_id"], "1000000000", "--config", cfg)
    assert added["balance_inr"] == Decimal("1000000000")


def test_negative_opening_credits_create_no_org(cfg, db):
    stderr = fails("admin", "create-org", "acme", "--credits-inr", "-3", "--config", cfg)
    assert stderr == "gateway: error: amount must be positive, got -3\n"
    assert count_events(db) == 0


def test_bad_retention_is_refused_by_create_org(cfg, db):
    new_org(cfg)
    events = count_events(db)
    result = run_cli("admin", "create-org", "x", "--retention", "forever", "--config", cfg)
    assert result.returncode == 2
    assert "invalid choice: 'forever'" in result.stderr
    assert count_events(db) == events


def test_bad_retention_is_refused_by_set_retention(cfg, db):
    org = new_org(cfg)
    events = count_events(db)
    result = run_cli("admin", "set-retention", org["org_id"], "forever", "--config", cfg)
    assert result.returncode == 2
    assert "invalid choice: 'forever'" in result.stderr
    assert count_events(db) == events


def test_unsupported_ledger_url_is_refused(tmp_path):
    cfg = write_config(tmp_path, '[ledger]\nurl = "mysql://db/ledger"\n')
    result = run_cli("admin", "balance", "x", "--config", str(cfg))
    assert result.returncode == 1
    assert result.stderr == ("gateway: error: unsupported ledger URL 'mysql://db/ledger':"
                             " expected sqlite:///path or postgresql://...\n")


# --- ledger verify / replay -----------------------------------------------------------------


def test_verify_passes_on_a_fresh_ledger(cfg, db):
    result = run_cli("ledger", "verify", "--config", cfg)
    assert result.returncode == 0, result.stderr
    assert one_json_object(result.stdout) == {"ok": True, "events_checked": 0, "problems": []}
    assert db.exists()  # any command creates the ledger on first use


def test_verify_passes_after_admin_commands(cfg):
    org = new_org(cfg, "--credits-inr", "5")
    ok("admin", "create-key", org["org_id"], "--config", cfg)
    result = run_cli("--config", cfg, "ledger", "verify")
    assert result.returncode == 0
    assert one_json_object(result.stdout) == {"ok": True, "events_checked": 4, "problems": []}


def test_replay_on_a_fresh_ledger(cfg):
    result = run_cli("ledger", "replay", "--config", cfg)
    assert result.returncode == 0, result.stderr
    assert one_json_object(result.stdout) == {"replayed_events": 0, "ok": True}


async def test_verify_and_replay_pass_after_traffic(gateway, org, config, tmp_path):
    for content in ("one [sim:tokens=3]", "two [sim:tokens=5]", "fail [sim:status=503]"):
        response = await gateway.client.post("/v1/chat/completions", json=chat_body(content),
                                              headers=auth(org["api_key"]))
        await response.read()
    cfg = str(write_config(tmp_path, f'[ledger]\nurl = "{config.ledger.url}"\n'))
    events = len(await gateway.events())
    assert events >= 2 + 1 + 3  # org, key, opening credits; at least one per request

    verified = await run_cli_async("ledger", "verify", "--config", cfg)
    assert verified.returncode == 0, verified.stderr
    assert one_json_object(verified.stdout) == {"ok": True, "events_checked": events, "problems": []}

    balance_before = await gateway.balance(org["org_id"])
    replayed = await run_cli_async("--config", cfg, "ledger", "replay")
    assert replayed.returncode == 0, replayed.stderr
    assert one_json_object(replayed.stdout) == {"replayed_events": events, "ok": True}
    assert await gateway.balance(org["org_id"]) == balance_before

    again = await run_cli_async("ledger", "verify", "--config", cfg)
    assert again.returncode == 0
    assert one_json_object(again.stdout)["ok"] is True


def test_verify_from_a_checkpoint_checks_only_what_came_after_it(cfg):
    org = new_org(cfg, "--credits-inr", "5")
    assert ok("ledger", "verify", "--checkpoint", "--config", cfg) == {
        "ok": True, "events_checked": 3, "problems": [], "verified_upto": 3, "full": True, "checkpoint_position": 4}
    ok("admin", "add-credits", org["org_id"], "2", "--config", cfg)
    assert ok("ledger", "verify", "--incremental", "--config", cfg) == {
        "ok": True, "events_checked": 2, "problems": [], "verified_upto": 5, "full": False, "checkpoint_position": 6}
    assert ok("ledger", "verify", "--full", "--jobs", "2", "--config", cfg) == {
        "ok": True, "events_checked": 6, "problems": []}


def test_replay_of_one_projection_in_two_processes(cfg, db):
    org = new_org(cfg, "--credits-inr", "5")
    run_sql(db, "UPDATE orgs SET credits_inr_nano = 0", "UPDATE api_keys SET name = 'forged'")
    assert ok("ledger", "replay", "--projection", "orgs", "--jobs", "2", "--config", cfg) == {
        "replayed_events": 3, "ok": True}
    assert ok("admin", "balance", org["org_id"], "--config", cfg)["balance_inr"] == Decimal("5")
    verified = run_cli("ledger", "verify", "--config", cfg)
    assert verified.returncode == 1 and "api_keys: row 0 differs" in verified.stdout


def test_replay_of_a_projection_that_does_not_exist_is_refused_by_name(cfg):
    result = run_cli("ledger", "replay", "--projection", "balances", "--config", cfg)
    assert result.returncode == 2 and "argument --projection: invalid choice: 'balances'" in result.stderr


async def test_a_replay_in_two_processes_swaps_in_while_the_gateway_serves(gateway, org, config, tmp_path):
    """Requests keep being answered and charged while `ledger replay` rebuilds every projection
    beside the live ones and swaps them in; afterwards everything verifies and no charge is lost."""
    cfg = str(write_config(tmp_path, f'[ledger]\nurl = "{config.ledger.url}"\n'))

    async def traffic() -> list[int]:
        statuses = []
        for n in range(40):
            response = await gateway.client.post("/v1/chat/completions", json=chat_body(f"n{n} [sim:tokens=3]"),
                                                 headers=auth(org["api_key"]))
            await response.read()
            statuses.append(response.status)
        return statuses

    statuses, replayed = await asyncio.gather(traffic(), run_cli_async("ledger", "replay", "--jobs", "2",
                                                                       "--config", cfg))
    assert replayed.returncode == 0, replayed.stderr
    assert statuses == [200] * 40
    charged = sum(e.charged_inr_nano for e in await request_events(gateway))
    [(spent,)] = await gateway.ledger.recorder._fetch("SELECT spent_inr_nano FROM orgs WHERE org_id = ?",
                                                      [org["org_id"]])
    assert spent == charged > 0
    verified = await run_cli_async("ledger", "verify", "--jobs", "2", "--config", cfg)
    assert verified.returncode == 0 and one_json_object(verified.stdout)["ok"] is True


# --- serve ----------------------------------------------------------------------------------


async def test_serve_answers_a_chat_and_exits_0_on_sigterm(tmp_path, sim_url, cfg):
    org = new_org(cfg, "--credits-inr", "10")
    env = clean_env(GATEWAY_PROVIDERS_OPENAI_BASE_URL=f"{sim_url}/v1",
                    GATEWAY_PROVIDERS_OPENAI_API_KEY=PROVIDER_KEY)
    async with gateway_process("serve", "--port", "0", "--config", cfg, env=env) as served:
        url = await served.ready_url()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
        async with aiohttp.ClientSession() as session, session.post(
                f"{url}/v1/chat/completions", json=chat_body("hi [sim:tokens=3]"),
                headers=auth(org["api_key"])) as response:
                assert response.status == 200
                body = decimal_json(await response.read())
        assert body["choices"][0]["message"]["content"] == "the quick brown "
        assert body["usage"]["completion_tokens"] == 3
        assert await served.stop(signal.SIGTERM) == 0
    assert "gateway_stopping" in served.stderr
    balance = ok("admin", "balance", org["org_id"], "--config", cfg)
    assert balance["balance_inr"] == Decimal("10") - body["usage"]["cost_inr"]


def served_by(stderr: str) -> set[int]:
    """The worker pids of the canonical request lines."""
    return {line["worker"] for line in json_lines(stderr) if line.get("event") == "request" and "worker" in line}


async def chat_on_new_connections(url: str, key: str, count: int, body: dict | None = None) -> list[int]:
    # A new connection per request, so the kernel spreads them over the workers' sockets.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True),
                                     timeout=aiohttp.ClientTimeout(total=30)) as session:
        async def one() -> int:
            async with session.post(f"{url}/v1/chat/completions", json=body or chat_body("hello [sim:tokens=3]"),
                                    headers=auth(key)) as response:
                await response.read()
                return response.status
        return list(await asyncio.gather(*(one() for _ in range(count))))


async def test_serve_with_two_workers_shares_one_port_and_follows_one_ledger(sim_url, cfg):
    org = new_org(cfg, "--credits-inr", "100")
    env = clean_env(GATEWAY_PROVIDERS_OPENAI_BASE_URL=f"{sim_url}/v1", GATEWAY_PROVIDERS_OPENAI_API_KEY=PROVIDER_KEY)
    async with gateway_process("serve", "--port", "0", "--workers", "2", "--config", cfg, env=env) as served:
        url = await served.wait_for_output(lambda _out, err: next(
            (line["url"] for line in json_lines(err)
             if line.get("event") == "gateway_ready" and "workers" in line), None))
        workers = [pid for pid in children_of(served.proc.pid) if "spawn_main" in cmdline(pid)]
        assert len(workers) == 2
        assert await chat_on_new_connections(url, org["api_key"], 40) == [200] * 40
        assert served_by(served.stderr) == set(workers)

        key = ok("admin", "create-key", org["org_id"], "--config", cfg)
        await asyncio.sleep(1.0)  # every worker follows the ledger within a second
        assert await chat_on_new_connections(url, key["api_key"], 10) == [200] * 10
        ok("admin", "revoke-key", key["key_id"], "--config", cfg)
        await asyncio.sleep(1.0)
        assert await chat_on_new_connections(url, key["api_key"], 20) == [401] * 20
        assert await served.stop(signal.SIGTERM) == 0
    assert not any(is_running(pid) for pid in workers)
    assert verify_ok(cfg)


async def test_sigterm_lets_a_stream_in_flight_finish_on_every_worker(sim_url, cfg):
    org = new_org(cfg, "--credits-inr", "10")
    env = clean_env(GATEWAY_PROVIDERS_OPENAI_BASE_URL=f"{sim_url}/v1", GATEWAY_PROVIDERS_OPENAI_API_KEY=PROVIDER_KEY)
    async with gateway_process("serve", "--port", "0", "--workers", "2", "--config", cfg, env=env) as served:
        url = await served.ready_url()
        async with aiohttp.ClientSession() as session:
            body = {**chat_body("slow [sim:tokens=8] [sim:tps=8]"), "stream": True}
            async with session.post(f"{url}/v1/chat/completions", json=body, headers=auth(org["api_key"])) as response:
                first = await response.content.readline()
                served.proc.send_signal(signal.SIGTERM)  # mid-stream
                rest = await response.read()
        assert first.startswith(b"data: ") and rest.rstrip().endswith(b"data: [DONE]")
        assert await served.stop(signal.SIGTERM) == 0, served.stderr
    assert ok("admin", "balance", org["org_id"], "--config", cfg)["balance_inr"] < 10


def verify_ok(cfg: str) -> bool:
    return run_cli("ledger", "verify", "--config", cfg).returncode == 0


def test_serve_exits_when_start_up_fails_instead_of_hanging(tmp_path):
    cfg = write_config(tmp_path, ledger_toml(tmp_path / "ledger.db", '[catalogue]\npath = "/nonexistent/cat.json"\n'))
    result = run_cli("serve", "--port", "0", "--config", str(cfg), timeout=20)
    assert result.returncode == 1
    assert "No such file or directory: '/nonexistent/cat.json'" in result.stderr
    assert "gateway_ready" not in result.stderr


def test_serve_refuses_a_catalogue_naming_a_provider_that_is_not_configured(tmp_path):
    shipped = json.loads(SHIPPED_PATH.read_text())["data"]
    record = {**shipped[0], "id": "elsewhere-chat", "providers": [{**shipped[0]["providers"][0], "providerId": "acme"}]}
    catalogue = tmp_path / "catalogue.json"
    catalogue.write_text(json.dumps({"data": [record]}))
    cfg = write_config(tmp_path, ledger_toml(tmp_path / "ledger.db", f'[catalogue]\npath = "{catalogue}"\n'))
    result = run_cli("serve", "--port", "0", "--config", str(cfg), timeout=20)
    assert result.returncode == 1
    assert "catalogue model 'elsewhere-chat', field 'providers': provider 'acme' is not configured" in result.stderr


def test_set_provider_key_takes_any_configured_provider_and_names_them_when_refusing(tmp_path):
    cfg = write_config(tmp_path, ledger_toml(tmp_path / "ledger.db",
                                             '[providers.acme]\nprotocol = "openai"\nbase_url = "http://127.0.0.1:9"\n'
                                             '[secrets]\nmaster_key = "m-0123456789abcdef"\n'))
    org = json.loads(run_cli("admin", "create-org", "acme-users", "--config", str(cfg)).stdout)
    done = run_cli("admin", "set-provider-key", org["org_id"], "acme", "sk-acme-0123456789", "--config", str(cfg))
    assert done.returncode == 0 and json.loads(done.stdout)["provider"] == "acme"
    refused = run_cli("admin", "set-provider-key", org["org_id"], "nobody", "k-0123456789", "--config", str(cfg))
    assert refused.returncode == 1 and "acme" in refused.stderr and "'nobody'" in refused.stderr


# --- demo -----------------------------------------------------------------------------------

BANNER_URL = re.compile(r"Model gateway demo is running at (http://\S+)")
BANNER_SIM = re.compile(r"upstream simulator: (http://\S+)")
BANNER_KEY = re.compile(r"demo API key:\s+(gwk_[A-Za-z0-9_-]{43,})")


async def demo_signs_its_checkpoints(url: str, cwd: Path) -> None:
    """The demo signs with the key it keeps in data/ and publishes it."""
    assert oct((cwd / "data" / "demo-signing.pem").stat().st_mode)[-3:] == "600"
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{url}/v1/ledger/public-key") as response:
            assert response.status == 200 and (await response.text()).startswith("-----BEGIN PUBLIC KEY-----")
        async with session.get(f"{url}/v1/ledger/checkpoints") as response:
            assert response.status == 200 and "public_keys" in await response.json()


async def demo_routes_to_every_cloud(url: str, key: str) -> None:
    """Bedrock (a bearer key), Vertex (the simulator's service account) and Azure (its api-key)."""
    async with aiohttp.ClientSession() as session:
        for model in ("bedrock/claude-sonnet-4-5", "vertex/claude-sonnet-4-5", "vertex/gemini-2.5-flash",
                      "azure/gpt-4o-mini"):
            body = {"model": model, "max_tokens": 20, "messages": [{"role": "user", "content": "Hello"}]}
            async with session.post(f"{url}/v1/chat/completions", json=body, headers=auth(key)) as response:
                assert response.status == 200, (model, await response.text())
                assert (await response.json())["usage"]["cost_inr"] > 0


async def test_demo_serves_its_printed_key_and_stops_cleanly_on_sigint(tmp_path):
    simulators: list[int] = []
    try:
        async with gateway_process("demo", "--port", "0", env=clean_env(), cwd=tmp_path) as demo:
            banner = await demo.wait_for_output(
                lambda stdout, _stderr: stdout if "Press Ctrl+C to stop." in stdout else None)
            url = BANNER_URL.search(banner).group(1)
            sim = BANNER_SIM.search(banner).group(1)
            key = BANNER_KEY.search(banner).group(1)
            assert f"Authorization: Bearer {key}" in banner
            simulators = [pid for pid in children_of(demo.proc.pid) if "simulator" in cmdline(pid)]
            assert len(simulators) == 1
            assert (tmp_path / "data" / "gateway.db").exists()

            async with aiohttp.ClientSession() as session, session.post(
                    f"{url}/v1/chat/completions", json=chat_body("Hello"), headers=auth(key)) as response:
                    assert response.status == 200
                    body = await response.json()
            assert body["object"] == "chat.completion"
            assert body["choices"][0]["message"]["content"]
            await demo_routes_to_every_cloud(url, key)
            await demo_signs_its_checkpoints(url, tmp_path)

            assert await demo.stop(signal.SIGINT) == 0
        deadline = time.monotonic() + 5
        while (is_running(simulators[0]) or port_is_open(sim)) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not is_running(simulators[0])
        assert not port_is_open(sim)
    finally:
        for pid in simulators:  # never leave the demo's simulator behind
            if is_running(pid) and "simulator" in cmdline(pid):
                os.kill(pid, signal.SIGKILL)


async def test_ledger_migrate_is_idempotent_and_a_server_may_refuse_an_old_schema(tmp_path, make_gateway, config):
    cfg = str(write_config(tmp_path, f'[ledger]\nurl = "sqlite:///{tmp_path}/fresh.db"\n'))
    refused = await run_cli_async("serve", "--config", cfg, env=clean_env(GATEWAY_LEDGER_MIGRATE_ON_START="false"))
    assert refused.returncode == 1 and "run `gateway ledger migrate`" in refused.stderr
    for _ in range(2):
        migrated = await run_cli_async("ledger", "migrate", "--config", cfg)
        assert migrated.returncode == 0, migrated.stderr
        assert one_json_object(migrated.stdout) == {"ok": True, "schema_version": SCHEMA_VERSION}
    ledger = msgspec.structs.replace(config.ledger, url=f"sqlite:///{tmp_path}/fresh.db", migrate_on_start=False)
    gateway = await make_gateway(msgspec.structs.replace(config, ledger=ledger))  # starts on the migrated store
    assert (await gateway.client.get("/")).status == 200


async def test_workers_stop_when_their_supervisor_is_killed(cfg):
    async with gateway_process("serve", "--port", "0", "--workers", "2", "--config", cfg, env=clean_env()) as served:
        await served.wait_for_output(lambda _out, err: '"workers":2' in err)
        workers = [pid for pid in children_of(served.proc.pid) if "spawn_main" in cmdline(pid)]
        served.proc.kill()
        await served.proc.wait()
        deadline = time.monotonic() + 10
        while any(is_running(pid) for pid in workers) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not any(is_running(pid) for pid in workers)


async def test_set_key_limits_prints_them_and_refuses_unknown_keys(cfg):
    org = new_org(cfg)
    none = {"budget_inr": None, "budget_period": "total", "models": [], "expires_at": None}
    assert ok("admin", "set-key-limits", org["key_id"], "--requests-per-minute", "60", "--config", cfg) == {
        "key_id": org["key_id"], "requests_per_minute": 60, "tokens_per_minute": 0, **none}
    unknown = await run_cli_async("admin", "set-key-limits", "key_nope", "--config", cfg)
    assert unknown.returncode == 1 and "no key key_nope" in unknown.stderr


async def test_set_key_limits_sets_spend_controls_leaves_the_rest_and_an_empty_value_clears_one(cfg):
    org = new_org(cfg)
    limits = ok("admin", "set-key-limits", org["key_id"], "--budget-inr", "12.5", "--budget-period", "day",
                "--models", "gpt-4o-mini,anthropic/*,openai/gpt-4o", "--expires", "2030-01-01T00:00:00Z",
                "--tokens-per-minute", "900", "--config", cfg)
    assert limits == {"key_id": org["key_id"], "requests_per_minute": 0, "tokens_per_minute": 900,
                      "budget_inr": 12.5, "budget_period": "day",
                      "models": ["gpt-4o-mini", "anthropic/*", "openai/gpt-4o"], "expires_at": 1893456000}
    cleared = ok("admin", "set-key-limits", org["key_id"], "--budget-inr", "", "--models", "", "--config", cfg)
    assert cleared == {**limits, "budget_inr": None, "models": []}  # the rest, rates too, as they were
    for option, value, says in [("--budget-inr", "-3", "positive"), ("--budget-period", "week", "budget period"),
                                ("--models", "nope-1", "not in the catalogue"), ("--expires", "later", "ISO 8601")]:
        refused = await run_cli_async("admin", "set-key-limits", org["key_id"], option, value, "--config", cfg)
        assert refused.returncode == 1 and says in refused.stderr, refused.stderr
    verified = await run_cli_async("ledger", "verify", "--config", cfg)
    assert verified.returncode == 0, verified.stderr


async def test_shutdown_timeout_bounds_how_long_sigterm_waits_for_a_stream(sim_url, cfg):
    org = new_org(cfg, "--credits-inr", "10")
    env = clean_env(GATEWAY_PROVIDERS_OPENAI_BASE_URL=f"{sim_url}/v1", GATEWAY_PROVIDERS_OPENAI_API_KEY=PROVIDER_KEY,
                    GATEWAY_SERVER_SHUTDOWN_TIMEOUT_S="0.5")
    async with gateway_process("serve", "--port", "0", "--config", cfg, env=env) as served:
        url = await served.ready_url()
        async with aiohttp.ClientSession() as session:
            body = {**chat_body("slow [sim:tokens=20] [sim:tps=4]"), "stream": True}
            async with session.post(f"{url}/v1/chat/completions", json=body, headers=auth(org["api_key"])) as response:
                await response.content.readline()
                served.proc.send_signal(signal.SIGTERM)
                with contextlib.suppress(aiohttp.ClientError):
                    rest = await response.read()
                    assert not rest.rstrip().endswith(b"data: [DONE]")  # cut off after 0.5 s, not 5 s
        assert await served.stop(signal.SIGTERM) == 0
