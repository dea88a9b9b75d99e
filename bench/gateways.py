"""The gateway under test, in each configuration, and the fake upstream in front of which it runs.

The gateway is the real console script (`gateway serve`) with a config file of its own, its
ledger durable, logging and metrics on as in production (its JSON log goes to a file).
"""

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from bench import ledger_check, procs
from bench.bare_proxy import READY_EVENT as PROXY_READY
from bench.fake_upstream import READY_EVENT as UPSTREAM_READY

UPSTREAM_KEY = "bench-upstream-key"
CREDITS_INR = "100000000"


@dataclass(frozen=True)
class Setup:
    title: str
    backend: str  # "sqlite" | "postgres"
    workers: int
    reserve: bool = True  # [billing] reserve: every paid request holds its worst case first
    escrow: bool = True  # [billing] escrow: ... against this process's slice held ahead, in memory


# The `-noreserve` twins show what holding a worst case before each request costs, and the
# `-ownholds` twins what it costs without escrow: one more durable write per request.
CONFIGS = {"sqlite1": Setup("SQLite, one process", "sqlite", 1),
           "sqlite1-ownholds": Setup("SQLite, one process, `escrow = false`", "sqlite", 1, escrow=False),
           "sqlite1-noreserve": Setup("SQLite, one process, `reserve = false`", "sqlite", 1, reserve=False),
           "sqlite2": Setup("SQLite, `--workers 2`", "sqlite", 2),
           "pg2": Setup("PostgreSQL, `--workers 2`", "postgres", 2),
           "pg2-ownholds": Setup("PostgreSQL, `--workers 2`, `escrow = false`", "postgres", 2, escrow=False),
           "pg2-noreserve": Setup("PostgreSQL, `--workers 2`, `reserve = false`", "postgres", 2, reserve=False)}


@dataclass(frozen=True)
class Target:
    """What load is aimed at: a base URL, the key to send, and the process (with its descendants)
    whose CPU time is counted."""
    url: str
    key: str
    pid: int


@dataclass(frozen=True)
class Prepared:
    """A configuration ready to serve: its fresh ledger, config file and a funded org's key."""
    ledger_url: str
    config: Path
    key: str


@contextlib.contextmanager
def fake_upstream(tmp: Path, name: str, *options: str) -> Iterator[tuple[subprocess.Popen, Target]]:
    command = [procs.PYTHON, "-m", "bench.fake_upstream", *options]
    with procs.running(command, tmp / f"{name}.log", UPSTREAM_READY, procs.clean_env()) as (process, url):
        yield process, Target(url, UPSTREAM_KEY, process.pid)


@contextlib.contextmanager
def simulator(tmp: Path, name: str = "simulator") -> Iterator[str]:
    """The upstream simulator (`python -m simulator`) for the block: its URL."""
    command = [procs.PYTHON, "-m", "simulator", "--port", "0"]
    with procs.running(command, tmp / f"{name}.log", "simulator_ready", procs.clean_env()) as (_, url):
        yield url


@contextlib.contextmanager
def bare_proxy(tmp: Path, upstream_url: str) -> Iterator[Target]:
    """The floor (bench.bare_proxy): aiohttp's server and client alone, in front of the upstream."""
    command = [procs.PYTHON, "-m", "bench.bare_proxy", "--upstream", upstream_url]
    with procs.running(command, tmp / "floor.log", PROXY_READY, procs.clean_env()) as (process, url):
        yield Target(url, UPSTREAM_KEY, process.pid)


def gateway_toml(ledger_url: str, upstream_url: str, workers: int, reserve: bool = True, escrow: bool = True,
                 ledger: str = "") -> str:
    """The config file's text; `ledger`: more lines of its [ledger] section."""
    return (f'[server]\nhost = "127.0.0.1"\nport = 0\nworkers = {workers}\n\n'
            f'[ledger]\nurl = "{ledger_url}"\n{ledger}\n[billing]\nreserve = {str(reserve).lower()}\n'
            f'escrow = {str(escrow).lower()}\n\n'
            f'[providers.openai]\nbase_url = "{upstream_url}/v1"\napi_key = "{UPSTREAM_KEY}"\n')


def create_org(config: Path) -> str:
    """A new org with plenty of credit; its API key."""
    out = subprocess.run([procs.GATEWAY, "admin", "create-org", "bench", "--credits-inr", CREDITS_INR,
                          "--config", str(config)], cwd=procs.ROOT, env=procs.clean_env(),
                         capture_output=True, text=True, check=True).stdout
    return orjson.loads(out.strip().splitlines()[-1])["api_key"]


@contextlib.contextmanager
def ledger_url(setup: Setup, tmp: Path, name: str) -> Iterator[str]:
    """A fresh ledger: a SQLite file in `tmp`, or a PostgreSQL schema dropped afterwards."""
    if setup.backend == "postgres":
        with ledger_check.postgres_ledger() as url:
            yield url
    else:
        yield f"sqlite:///{tmp}/{name}.db"


@contextlib.contextmanager
def prepared(name: str, upstream_url: str, tmp: Path) -> Iterator[Prepared]:
    """Configuration `name` on a fresh ledger with one funded org, for the block (a PostgreSQL
    schema is dropped after it, so check the ledger inside it, once the gateway has stopped)."""
    setup = CONFIGS[name]
    with ledger_url(setup, tmp, name) as url:
        config = tmp / f"{name}.toml"
        config.write_text(gateway_toml(url, upstream_url, setup.workers, setup.reserve, setup.escrow))
        yield Prepared(url, config, create_org(config))


@contextlib.contextmanager
def serving(ready: Prepared, log: Path | None = None) -> Iterator[Target]:
    """`gateway serve` for the block; stopped (SIGTERM, in-flight requests finish) after it. Each
    process on the same configuration needs a `log` of its own (its ready line is read from it)."""
    command = [procs.GATEWAY, "serve", "--config", str(ready.config)]
    log = log or ready.config.with_suffix(".log")
    with procs.running(command, log, "gateway_ready", procs.clean_env()) as (process, url):
        yield Target(url, ready.key, process.pid)
