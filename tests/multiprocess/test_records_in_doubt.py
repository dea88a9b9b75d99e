"""What a client is told and what the ledger records agree, at the exact moments that decide it.

- PostgreSQL is partitioned away just as the COMMIT of a request's record is sent (a proxy that
  holds back the COMMIT of the transaction carrying the request's prompt): the outcome is in
  doubt, so the record stands. The client is answered as charged, and the gateway appends the
  same record again until the ledger takes it. Either the held COMMIT lands when the partition
  heals (the second append is then refused as a duplicate), or it never lands (its connection
  reset) and the second append records it. In both cases the request is charged exactly once.
- A record still queued behind a stuck commit past `record_timeout_s` is withdrawn: the client
  hears that nothing was charged, and nothing is, even after the database comes back.
- Once a commit has failed, paid requests are refused up front with 503 and Retry-After, even
  when an escrow slice could admit them, until the database answers again.
- A served gateway whose disk fills mid-load answers each request as its ledger records it.
Each case with escrow on and off, streamed and whole.
"""

import asyncio
import contextlib
import resource
import sqlite3
from collections.abc import AsyncIterator

import aiohttp
import msgspec
import pytest

from gateway.edge.state import SERVICES
from ledger.backends.postgres import PostgresRecorder
from ledger.events import CreditsHeld
from tests.gateway.gateway_helpers import gateway_process, run_cli_async, write_config
from tests.multiprocess.outage_helpers import (
    Answer, assert_every_charge_accounted_for, balance_matches_charges, chat, load, outcome,
)
from tests.multiprocess.test_kill9 import ledger_state, new_org
from tests.support import POSTGRES_DSN, PROVIDER_KEY, clean_env, poll, postgres_url
from tests.tcp_proxy import TcpProxy, proxied_service

TIMEOUT_S = 0.5  # the ledger's statement and connect timeouts in these tests
MARKER = "in-doubt-7f3a"  # in the prompt of the request whose COMMIT is held back


class CommitTrap(TcpProxy):
    """A proxy that, once armed with a marker, partitions the network (blackholes every
    connection) just before forwarding the COMMIT of the transaction that carried the marker."""

    marker: bytes = b""

    def arm(self, marker: str) -> None:
        self.marker = marker.encode()

    async def _client_to_server(self, client: asyncio.StreamReader, server: asyncio.StreamWriter) -> None:
        await self._pump(client, server, self._watched(client))

    async def _watched(self, reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
        carried = False  # this connection's transaction wrote the marker
        while data := await reader.read(65536):
            carried = carried or bool(self.marker and self.marker in data)
            if carried and b"COMMIT" in data:
                self.marker, carried = b"", False
                self.blackhole()  # the COMMIT below is held back until restore (or dropped by reset)
            yield data


@pytest.fixture
async def trap():
    async with proxied_service(5432, "PostgreSQL", CommitTrap) as proxy:
        yield proxy


def short_timeouts(config, ledger_url: str, **billing):
    ledger = msgspec.structs.replace(config.ledger, url=ledger_url, timeout_s=TIMEOUT_S, connect_timeout_s=TIMEOUT_S)
    return msgspec.structs.replace(config, ledger=ledger,
                                   billing=msgspec.structs.replace(config.billing, hold_lease_s=3, **billing))


async def warmed(gateway) -> str:
    """A new org's key, after a few charged requests (its escrow slice taken, when escrow is on)."""
    org = await gateway.new_org("100")
    for n in range(4):
        assert outcome(await chat(gateway.client, org["api_key"], n)) == "charged"
    return org["api_key"]


async def in_doubt_count(gateway) -> float:
    text = await (await gateway.client.get("/metrics")).text()
    line = next((line for line in text.splitlines() if line.startswith(
        'gateway_ledger_records_total{outcome="in_doubt"}')), "x 0")
    return float(line.split()[-1])


async def settled_events(gateway, recorder_url: str) -> list:
    """Every event, once the gateway's background records and releases have ended."""
    await asyncio.wait_for(gateway.server.app[SERVICES].releases.settled(), 30)
    dsn, _, schema = recorder_url.partition("?schema=")
    recorder = PostgresRecorder(POSTGRES_DSN, schema) if dsn.startswith("postgresql") else None
    if recorder is None:
        return await gateway.events()
    await recorder.open(migrate=False)
    try:
        return await recorder.read(0, 100_000)
    finally:
        await recorder.close()


async def assert_ledger_sound(gateway, url: str, org_id: str, tmp_path) -> None:
    """Nothing left held (once lapsed holds were expired), and `ledger verify` passes."""
    async def held() -> int:
        rows = await gateway.ledger.recorder._fetch("SELECT held_inr_nano FROM orgs WHERE org_id = ?", (org_id,))
        return rows[0][0]
    assert await poll(held, lambda amount: amount == 0, timeout=20) == 0
    direct = write_config(tmp_path, f'[ledger]\nurl = "{url}"\n', "direct.toml")
    verified = await run_cli_async("ledger", "verify", "--config", str(direct))
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.mark.parametrize("escrow", [True, False], ids=["escrow", "holds"])
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("heals", ["commit lands late", "commit dropped"])
async def test_a_commit_in_doubt_is_answered_charged_and_charged_once(make_gateway, config, trap, pg_schema,
                                                                       tmp_path, escrow, stream, heals):
    gateway = await make_gateway(short_timeouts(config, postgres_url(trap.port, pg_schema), escrow=escrow))
    key = await warmed(gateway)
    trap.arm(MARKER)
    answer = await chat(gateway.client, key, 0 if stream else 1, text=MARKER)
    assert outcome(answer) == "charged" and answer.stream == stream, answer
    if heals == "commit dropped":
        trap.reset()  # the held COMMIT dies with its connection: the transaction is rolled back
    await trap.restore()

    recorded = await settled_events(gateway, postgres_url(schema=pg_schema))
    assert await in_doubt_count(gateway) == 1
    assert assert_every_charge_accounted_for([answer], recorded) == {"charged": 1}
    org_id = next(r.stream_id for r in recorded if getattr(r.event, "request_id", "") == answer.request_id)
    await assert_ledger_sound(gateway, postgres_url(schema=pg_schema), org_id, tmp_path)


@contextlib.contextmanager
def write_lock(path: str):
    """Another process's write transaction on the SQLite ledger, held for the block."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


@pytest.mark.parametrize("escrow", [True, False], ids=["escrow", "holds"])
async def test_a_record_queued_past_its_timeout_is_withdrawn_and_never_charged(make_gateway, config, tmp_path,
                                                                               escrow):
    url = config.ledger.url
    settings = short_timeouts(config, url, escrow=escrow, record_timeout_s=0.2)
    gateway = await make_gateway(msgspec.structs.replace(
        settings, ledger=msgspec.structs.replace(settings.ledger, timeout_s=1.5)))
    key = await warmed(gateway)
    # Streams admitted (from the slice, or each with its hold committed) before the lock is taken,
    # their upstream answering only after it is.
    before = await own_holds(gateway)
    slow = [asyncio.create_task(chat(gateway.client, key, n, text="hello [sim:latency_ms=800]"))
            for n in range(0, 12, 2)]
    await poll(lambda: own_holds(gateway), lambda count: escrow or count == before + len(slow), timeout=10)
    with write_lock(url.removeprefix("sqlite:///")):
        # The first record waits on the lock in a commit (1.5 s, then fails); those after it queue
        # behind that commit and are withdrawn after 0.2 s. Either way: nothing charged.
        answers = await asyncio.gather(*slow)
    assert [outcome(a) for a in answers] == ["cut short"] * len(slow), answers

    text = await (await gateway.client.get("/metrics")).text()
    assert 'gateway_ledger_records_total{outcome="withdrawn"}' in text, text
    recorded = await settled_events(gateway, url)
    assert_every_charge_accounted_for(answers, recorded)
    org_id = recorded[-1].stream_id
    await assert_ledger_sound(gateway, url, org_id, tmp_path)


async def own_holds(gateway) -> int:
    """How many holds requests have taken on their own (not escrow slices), ever."""
    return sum(1 for r in await gateway.events() if isinstance(r.event, CreditsHeld) and r.event.request_id)


async def test_paid_requests_are_refused_up_front_while_the_ledger_is_known_away(make_gateway, config, tmp_path):
    url = config.ledger.url
    gateway = await make_gateway(short_timeouts(config, url, escrow=True))
    key = await warmed(gateway)
    with write_lock(url.removeprefix("sqlite:///")):
        first = await chat(gateway.client, key, 0)  # admitted from the slice; its record fails
        assert outcome(first) == "cut short", first
        later: list[Answer] = [await chat(gateway.client, key, n) for n in (2, 4)]
    # Streams asked for, JSON 503s answered: refused before anything was sent, though the slice
    # could have admitted them.
    assert [(a.status, a.content_type, a.retry_after) for a in later] == [(503, "application/json", "1")] * 2
    assert all(outcome(a) == "refused" for a in later)

    async def answered() -> Answer:
        return await chat(gateway.client, key, 6)
    assert outcome(await poll(answered, lambda a: a.status == 200, timeout=10)) == "charged"
    recorded = await settled_events(gateway, url)
    assert_every_charge_accounted_for([first, *later], recorded)


async def test_a_full_disk_answers_each_request_as_the_ledger_records_it(tmp_path, sim_url):
    """`gateway serve` on SQLite under load, its file size limit set to 0 mid-load (every write
    that grows a file fails as a full disk would: SQLITE_FULL), then lifted."""
    url = f"sqlite:///{tmp_path}/ledger.db"
    org = await new_org(url)
    config = str(write_config(tmp_path, f"""
[ledger]
url = "{url}"
timeout_s = 0.5
[billing]
record_timeout_s = 1.0
[providers.openai]
base_url = "{sim_url}/v1"
api_key = "{PROVIDER_KEY}"
"""))
    async with gateway_process("serve", "--port", "0", "--config", config, env=clean_env()) as served:
        base = await served.ready_url()
        async with aiohttp.ClientSession(base, timeout=aiohttp.ClientTimeout(total=30)) as client:
            stop = asyncio.Event()
            traffic = asyncio.create_task(load(client, org["api_key"], stop, clients=6))
            await asyncio.sleep(0.5)
            unlimited = resource.prlimit(served.proc.pid, resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
            await asyncio.sleep(1.5)
            resource.prlimit(served.proc.pid, resource.RLIMIT_FSIZE, unlimited)
            await poll(lambda: chat(client, org["api_key"], 1), lambda a: a.status == 200, timeout=30)
            await asyncio.sleep(0.3)
            stop.set()
            answers = await traffic
    recorded, credits, balance = await ledger_state(url, org["org_id"])
    outcomes = assert_every_charge_accounted_for(answers, recorded)
    assert outcomes["charged"] > 10 and outcomes["refused"] + outcomes["cut short"] > 2, outcomes
    assert balance_matches_charges(recorded, org["org_id"], credits, balance)
    verified = await run_cli_async("ledger", "verify", "--config", config)
    assert verified.returncode == 0, verified.stdout + verified.stderr
