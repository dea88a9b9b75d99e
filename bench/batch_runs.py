"""The batch benchmark's client side and its gateways: a fresh `gateway serve` (bench.gateways) on a
fresh ledger per run, with the google and openai providers at the simulator and `[batches]` set;
batches sent through it with the official openai SDK (in this process, never the gateway's),
waited for, their output and error files read back, and what the ledger then holds checked.

Two paths: `gateway-run` (gemini-2.5-flash: the google provider has no batch API, so the gateway
runs each line through its single route, `[batches] concurrency` at a time) and `native`
(gpt-4o-mini: sent once to the openai provider's Batch API, the simulator's, polled every
`[batches] poll_interval_s`, the results recorded at batch prices).
"""

import contextlib
import io
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import openai
import orjson

from bench import batch_ledger, gateways, ledger_check

ENDPOINT: Final = "/v1/chat/completions"
PATHS = {"gateway-run": "gemini-2.5-flash", "native": "gpt-4o-mini"}
ENDED = ("completed", "failed", "expired", "cancelled")
POLL_S = 0.2
SIMULATOR_KEY = "bench-simulator-key"  # the simulator checks none


@dataclass(frozen=True)
class Settings:
    """What every run shares: the simulator, the ledger backend, the `[batches]` knobs, deadlines."""
    sim_url: str
    tmp: Path
    backend: str  # "sqlite" | "postgres"
    concurrency: int
    poll_interval_s: float
    deadline_s: float


def gateway_toml(ledger_url: str, settings: Settings) -> str:
    """bench.gateways' production-like configuration, google at the simulator, `[batches]` set."""
    return (gateways.gateway_toml(ledger_url, settings.sim_url, 1)
            + f'\n[providers.google]\nbase_url = "{settings.sim_url}"\napi_key = "{SIMULATOR_KEY}"\n'
            + f'\n[batches]\nconcurrency = {settings.concurrency}\npoll_interval_s = {settings.poll_interval_s}\n'
            + f'files_path = "{settings.tmp / "files"}"\n')


@contextlib.contextmanager
def prepared(settings: Settings, name: str) -> Iterator[gateways.Prepared]:
    """A fresh ledger (a SQLite file, or a PostgreSQL schema dropped after the block), its config
    file and a funded org's key."""
    with gateways.ledger_url(gateways.Setup(name, settings.backend, 1), settings.tmp, name) as url:
        config = settings.tmp / f"{name}.toml"
        config.write_text(gateway_toml(url, settings))
        yield gateways.Prepared(url, config, gateways.create_org(config))


def custom_ids(count: int) -> list[str]:
    return [f"line-{n:05d}" for n in range(count)]


def chat_lines(model: str, count: int, text: str = "Say hello") -> bytes:
    """A batch input of `count` chat lines (`text` may carry simulator directives, `[sim:..]`)."""
    return b"".join(orjson.dumps({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": {
        "model": model, "messages": [{"role": "user", "content": f"{text} {custom_id}"}], "max_tokens": 16}}) + b"\n"
        for custom_id in custom_ids(count))


def sdk(target: gateways.Target) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{target.url}/v1", api_key=target.key, max_retries=0, timeout=600)


def upload(client: openai.OpenAI, data: bytes) -> str:
    return client.files.create(file=("input.jsonl", io.BytesIO(data)), purpose="batch").id


def create(client: openai.OpenAI, file_id: str) -> str:
    batch = client.batches.create(input_file_id=file_id, endpoint=ENDPOINT, completion_window="24h")
    if batch.status in ENDED:
        raise RuntimeError(f"batch {batch.id} ended at once: {batch.status} {batch.errors}")
    return batch.id


def submit(client: openai.OpenAI, data: bytes) -> str:
    """Upload `data` and create a batch of it: the batch's id."""
    return create(client, upload(client, data))


def wait_for(condition: Callable[[], bool], deadline_s: float, what: str, every_s: float = 0.02) -> None:
    """Return once `condition()` holds; raise after `deadline_s`."""
    until = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > until:
            raise TimeoutError(f"waited {deadline_s} s for {what}")
        time.sleep(every_s)


def wait_ended(client: openai.OpenAI, batch_id: str, deadline_s: float) -> openai.types.Batch:
    """The batch once its status is final (polled every POLL_S)."""
    found: list[openai.types.Batch] = []

    def ended() -> bool:
        found.append(client.batches.retrieve(batch_id))
        return found[-1].status in ENDED
    wait_for(ended, deadline_s, f"batch {batch_id} to end", POLL_S)
    return found[-1]


def outcome_ids(client: openai.OpenAI, batch: openai.types.Batch) -> Counter:
    """custom_id -> how many times the batch's output and error files name it, together."""
    counted: Counter = Counter()
    for file_id in (batch.output_file_id, batch.error_file_id):
        if file_id:
            for line in client.files.content(file_id).content.splitlines():
                if line.strip():
                    counted[orjson.loads(line)["custom_id"]] += 1
    return counted


def each_once(counted: Counter, ids: list[str]) -> dict:
    """Whether the files name every custom_id exactly once and nothing else."""
    missing = [c for c in ids if counted.get(c, 0) == 0]
    twice = sorted(c for c, n in counted.items() if n > 1)
    strangers = sorted(set(counted) - set(ids))
    return {"ok": not (missing or twice or strangers), "named": sum(counted.values()),
            "missing": missing[:10], "missing_count": len(missing), "twice": twice[:10], "strangers": strangers[:10]}


def ledger_checks(ready: gateways.Prepared, batch_id: str, ids: list[str]) -> dict:
    """With the gateway stopped: each line charged once (from the events), `gateway ledger verify`."""
    passed, output = ledger_check.verify(ready.config)
    return {"charged_once": batch_ledger.charged_once(ready.ledger_url, batch_id, ids),
            "recorded": batch_ledger.lines_recorded(ready.ledger_url, batch_id),
            "verify_passed": passed, "verify_output": output}


def _control(sim_url: str, body: dict | None = None) -> dict:
    """The simulator's batch control route: GET, or POST `body` (urllib raises on an error status)."""
    request = urllib.request.Request(f"{sim_url}/_sim/batches", data=None if body is None else orjson.dumps(body),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return orjson.loads(response.read())


def upstream_ids(sim_url: str) -> set[str]:
    """The id of every batch the simulator was asked to create (GET /_sim/batches)."""
    return {b["id"] for b in _control(sim_url)["data"]}


def pause_simulator(sim_url: str, paused: bool) -> None:
    """While paused, the simulator's batches stay in progress (POST /_sim/batches)."""
    _control(sim_url, {"paused": paused})
