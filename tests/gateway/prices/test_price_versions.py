"""Price versions a bill can prove (issue 38): the version in force named by GET /v1/models and
published by GET /v1/prices/{version}; a changed catalogue put in force, without a restart, at the
instant it states (`gateway admin reload-catalogue`, SIGHUP), a file that does not validate refused;
and an export checked offline against the published versions, a charge at another price caught."""

import asyncio
import json
import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ledger import prices as price_stream
from ledger.events import Priced, RequestCompleted
from ledger.recorder import Append
from tests.gateway.gateway_helpers import gateway_process, run_cli_async, write_config
from tests.gateway.prices.support import MINI_PRICES, tiered_document, with_catalogue, write_catalogue
from tests.support import clean_env, single_attempt

DEADLINE_S = 30.0  # generous: a loaded machine is slow, not wrong


async def until(probe, timeout: float = DEADLINE_S):
    """`await probe()` until it returns something true; its value."""
    deadline = time.monotonic() + timeout
    while not (found := await probe()):
        assert time.monotonic() < deadline, "the condition did not come about in time"
        await asyncio.sleep(0.05)
    return found


def at(seconds_from_now: float) -> str:
    return datetime.fromtimestamp(time.time() + seconds_from_now, UTC).isoformat()


def repriced(prompt: str, effective_from: str | None = None, history: bool = True) -> dict:
    """The tiered catalogue with gpt-4o-mini's prompt price changed (from `effective_from`, the old
    price kept in its history until then, or left to the catalogue in force without `history`)."""
    mini = {**MINI_PRICES, "prompt": prompt}
    if effective_from is not None:
        past = {**MINI_PRICES, "effective_from": "2020-01-01T00:00:00Z", "effective_to": effective_from}
        mini |= {"effective_from": effective_from, "price_history": [past] if history else []}
    return tiered_document(mini=mini)


@pytest.fixture
def catalogue_path(tmp_path: Path) -> Path:
    return write_catalogue(tmp_path / "catalogue.json", tiered_document())


@pytest.fixture
def cli_config(tmp_path: Path, catalogue_path: Path) -> str:
    """The same ledger and catalogue as the gateway's, for the operator's commands."""
    return str(write_config(tmp_path, f'[ledger]\nurl = "sqlite:///{tmp_path}/ledger.db"\n'
                                      f'[catalogue]\npath = "{catalogue_path}"\nswitch_delay_s = 0.5\n', "cli.toml"))


@pytest.fixture
async def gateway(make_gateway, config, catalogue_path):
    return await make_gateway(single_attempt(with_catalogue(config, catalogue_path, switch_delay_s=0.5)))


async def version_in_force(gateway) -> str:
    async with gateway.client.get("/v1/models") as response:
        return (await response.json())["price_version"]


async def published(gateway, version: str) -> tuple[int, dict]:
    async with gateway.client.get(f"/v1/prices/{version}") as response:
        return response.status, await response.json()


async def charged_prompt_price(gateway, key: str) -> tuple[str, str]:
    """(the prompt price, the version) one gpt-4o-mini request is charged at."""
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    async with gateway.client.post("/v1/chat/completions", json=body,
                                   headers={"Authorization": f"Bearer {key}"}) as response:
        assert response.status == 200, await response.text()
        request_id = response.headers["X-Request-Id"]
    [charge] = [r.event for r in await gateway.events()
                if isinstance(r.event, RequestCompleted) and r.event.request_id == request_id]
    return charge.priced.prompt_usd, charge.priced.version


async def test_the_version_in_force_is_named_and_published_without_a_key(gateway):
    version = await version_in_force(gateway)
    status, document = await published(gateway, version)
    assert status == 200 and document["version"] == version and document["effective_to"] is None
    assert document["intervals"] == [{"effective_from": document["effective_from"], "effective_to": None}]
    [mini] = [m for m in document["data"] if m["id"] == "gpt-4o-mini"]
    pricing = mini["providers"][0]["pricing"]
    assert pricing["prompt"] == "0.00000015" and pricing["service_tiers"]["flex"]["prompt"] == "0.000000075"
    assert pricing["tiers"][0]["above_prompt_tokens"] == 60 and pricing["input_cache_write_1h"] == "0.00000015"
    status, error = await published(gateway, "0" * 32)
    assert status == 404 and "never in force" in error["error"]["message"]


@pytest.mark.parametrize("history", [True, False], ids=["past-price-stated", "past-price-in-force"])
async def test_a_change_takes_effect_at_its_stated_instant_everywhere(gateway, catalogue_path, cli_config, history):
    org = await gateway.new_org()
    old = await version_in_force(gateway)
    instant = at(4)
    write_catalogue(catalogue_path, repriced("0.0000002", instant, history))
    result = await run_cli_async("admin", "reload-catalogue", "--config", cli_config)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    new = summary["switches"][-1]["price_version"]
    assert summary["changed"] and summary["price_version"] == old and new != old
    await until(lambda: _status(gateway, new, 200))  # the gateway has it, scheduled
    if time.time() < datetime.fromisoformat(instant).timestamp() - 0.5:  # before the instant: the old price
        assert await charged_prompt_price(gateway, org["api_key"]) == ("0.00000015", old)
    await until(lambda: _is(version_in_force(gateway), new))
    assert time.time() >= datetime.fromisoformat(instant).timestamp()  # not before the instant
    assert await charged_prompt_price(gateway, org["api_key"]) == ("0.0000002", new)
    _, document = await published(gateway, old)
    assert document["effective_to"] == instant.replace("+00:00", "Z")


async def test_a_file_that_does_not_validate_is_refused_and_the_old_one_serves(gateway, catalogue_path, cli_config):
    before = await version_in_force(gateway)
    switches = len(await price_stream.every(gateway.ledger.recorder))
    write_catalogue(catalogue_path, tiered_document(mini={**MINI_PRICES, "prompt": "free"}))
    result = await run_cli_async("admin", "reload-catalogue", "--config", cli_config)
    assert result.returncode == 1 and "gpt-4o-mini" in result.stderr and "'free' is not a decimal" in result.stderr
    catalogue_path.write_text("{not json")
    result = await run_cli_async("admin", "reload-catalogue", "--config", cli_config)
    assert result.returncode == 1 and "catalogue file" in result.stderr
    assert len(await price_stream.every(gateway.ledger.recorder)) == switches
    assert await version_in_force(gateway) == before


async def test_unchanged_a_reload_records_nothing(gateway, cli_config):
    result = await run_cli_async("admin", "reload-catalogue", "--config", cli_config)
    assert result.returncode == 0 and json.loads(result.stdout)["changed"] is False
    assert len(await price_stream.every(gateway.ledger.recorder)) == 1


async def test_sighup_puts_the_changed_file_in_force_and_refuses_a_broken_one(tmp_path, catalogue_path):
    config = write_config(tmp_path, f'[ledger]\nurl = "sqlite:///{tmp_path}/served.db"\n[server]\nport = 0\n'
                                    f'[catalogue]\npath = "{catalogue_path}"\nswitch_delay_s = 0.2\n')
    async with gateway_process("serve", "--config", str(config), env=clean_env()) as served:
        url = await served.ready_url()
        first = await _served_version(url)
        write_catalogue(catalogue_path, repriced("0.0000002"))
        os.kill(served.proc.pid, signal.SIGHUP)
        second = await until(lambda: _changed_from(url, first))
        catalogue_path.write_text('{"data": [{"id": "broken"}]}')
        os.kill(served.proc.pid, signal.SIGHUP)
        await served.wait_for_output(lambda _out, err: "catalogue_reload_refused" in err and "broken" in err)
        assert await _served_version(url) == second
        assert served.proc.returncode is None  # the hang-up did not stop it


async def test_an_export_is_checked_against_the_published_prices(gateway, catalogue_path, cli_config, tmp_path):
    org = await gateway.new_org()
    versions = {(await charged_prompt_price(gateway, org["api_key"]))[1]}
    write_catalogue(catalogue_path, repriced("0.0000002"))
    assert (await run_cli_async("admin", "reload-catalogue", "--config", cli_config)).returncode == 0
    await until(lambda: _not_in(version_in_force(gateway), versions))
    versions.add((await charged_prompt_price(gateway, org["api_key"]))[1])
    assert len(versions) == 2
    prices = tmp_path / "prices"
    prices.mkdir()
    for version in versions:
        (prices / f"{version}.json").write_text(json.dumps((await published(gateway, version))[1]))
    export = await _export(org["org_id"], cli_config, tmp_path / "export.ndjson")
    checked = await run_cli_async("ledger", "check-export", str(export), "--prices", str(prices))
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["prices_checked"] == 2
    # a charge at a price its version never published (an operator's hand, a gateway that lies)
    await _forge_charge(gateway, org["org_id"], sorted(versions)[0])
    forged = await _export(org["org_id"], cli_config, tmp_path / "forged.ndjson")
    checked = await run_cli_async("ledger", "check-export", str(forged), "--prices", str(prices))
    assert checked.returncode == 1 and "request forged" in checked.stderr and "prompt price" in checked.stderr
    # a published price list altered after the fact no longer hashes to its version
    for path in prices.iterdir():
        path.write_text(path.read_text().replace('"0.00000015"', '"0.00000001"'))
    checked = await run_cli_async("ledger", "check-export", str(export), "--prices", str(prices))
    assert checked.returncode == 1 and "altered" in checked.stderr


async def _forge_charge(gateway, org_id: str, version: str) -> None:
    """A charge consistent with its own prices (its arithmetic checks out) but not at its version's."""
    priced = Priced(prompt_usd="0.0000001", completion_usd="0.0000006", cache_read_usd="0.0000001",
                    cache_write_usd="0.0000001", cache_write_1h_usd="0.0000001", version=version, tier="standard")
    event = RequestCompleted(request_id="forged", key_id="", route="/v1/chat/completions", model="gpt-4o-mini",
                             provider="openai", status=200, prompt_tokens=10, cost_usd_nano=1000,
                             cost_inr_nano=84000, charged_inr_nano=84000, usd_to_inr="84", priced=priced)
    [outcome] = await gateway.ledger.recorder.append([Append(org_id, [event])])
    assert not isinstance(outcome, Exception), outcome


async def _export(org_id: str, cli_config: str, out: Path) -> Path:
    result = await run_cli_async("ledger", "export", org_id, "--out", str(out), "--config", cli_config)
    assert result.returncode == 0, result.stderr
    return out


async def _status(gateway, version: str, status: int) -> bool:
    return (await published(gateway, version))[0] == status


async def _is(found, wanted) -> bool:
    return await found == wanted


async def _not_in(found, versions: set[str]) -> bool:
    return await found not in versions


async def _served_version(url: str) -> str:
    import aiohttp
    async with aiohttp.ClientSession() as session, session.get(f"{url}/v1/models") as response:
        return (await response.json())["price_version"]


async def _changed_from(url: str, version: str) -> str | None:
    found = await _served_version(url)
    return found if found != version else None



async def test_every_replica_switches_at_the_instant_not_when_it_noticed(make_gateway, config, catalogue_path,
                                                                         cli_config, gateway):
    other = await make_gateway(single_attempt(with_catalogue(config, catalogue_path, switch_delay_s=0.5)))
    replicas = (gateway, other)  # one ledger, each following it
    old = await version_in_force(gateway)
    instant = at(4)
    write_catalogue(catalogue_path, repriced("0.0000002", instant))
    result = await run_cli_async("admin", "reload-catalogue", "--config", cli_config)
    new = json.loads(result.stdout)["switches"][-1]["price_version"]
    for replica in replicas:
        await until(lambda replica=replica: _status(replica, new, 200))
    switch = datetime.fromisoformat(instant).timestamp()
    if time.time() < switch - 0.5:
        assert [await version_in_force(replica) for replica in replicas] == [old, old]
    await asyncio.sleep(max(0.0, switch - time.time()))
    assert [await version_in_force(replica) for replica in replicas] == [new, new]
    documents = [(await published(replica, old))[1] for replica in replicas]
    assert documents[0] == documents[1] and documents[0]["effective_to"] == instant.replace("+00:00", "Z")
