"""kill -9 in the middle of a batch: `gateway serve` SIGKILLed (it and its descendants, nothing of
theirs runs after) at a chosen moment, a fresh `gateway serve` started on the same ledger, and so
on until the batch ends. Then: every custom_id once across the output and error files, each line
charged once (one RequestCompleted per custom_id, read from the events), `gateway ledger verify`
passes, and for a native batch the upstream batch was created once (GET /_sim/batches).

gateway-run: killed once about half the lines are in the request log (polled with sqlite3).
native: the simulator paused so the upstream batch stays in progress; killed once BatchSubmitted is
recorded; the next gateway unpauses the simulator and is killed once about half the results are
recorded (if the batch has not ended by then); the last one finishes it.
"""

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench import batch_ledger, batch_runs, gateways, procs
from bench.batch_runs import Settings


@dataclass(frozen=True)
class Kill:
    """One gateway's life: what it does once up, and when it is killed (given the batch's id)."""
    when: Callable[[str], bool]
    what: str
    first: Callable[[], None] = field(default=lambda: None)


def half_recorded(ledger_url: str, lines: int) -> Callable[[str], bool]:
    """About half the batch's lines recorded, or the batch ended (too fast to catch)."""
    def due(batch_id: str) -> bool:
        return (batch_ledger.lines_recorded(ledger_url, batch_id) >= lines // 2
                or batch_ledger.events_of_batch(ledger_url, batch_id, "batch_ended") > 0)
    return due


def submitted(ledger_url: str) -> Callable[[str], bool]:
    return lambda batch_id: batch_ledger.events_of_batch(ledger_url, batch_id, "batch_submitted") > 0


def kills_of(path: str, ready: gateways.Prepared, settings: Settings, lines: int) -> list[Kill]:
    half = half_recorded(ready.ledger_url, lines)
    if path == "gateway-run":
        return [Kill(half, "half the lines recorded")]
    return [Kill(submitted(ready.ledger_url), "BatchSubmitted recorded, the simulator paused",
                 lambda: batch_runs.pause_simulator(settings.sim_url, True)),
            Kill(half, "half the results recorded", lambda: batch_runs.pause_simulator(settings.sim_url, False))]


def log_of(ready: gateways.Prepared, life: int) -> Path:
    """The log of the configuration's `life`th gateway process (the first is 0)."""
    return ready.config.with_name(f"{ready.config.stem}-{life}.log")


def killed_life(ready: gateways.Prepared, settings: Settings, data: bytes, kill: Kill, life: int,
                batch_id: str) -> tuple[str, dict]:
    """One gateway process: the batch created if it was not yet, SIGKILLed once `kill.when` holds;
    the batch's id and what the ledger held at the kill."""
    with gateways.serving(ready, log_of(ready, life)) as target:
        kill.first()
        batch_id = batch_id or batch_runs.submit(batch_runs.sdk(target), data)
        batch_runs.wait_for(functools.partial(kill.when, batch_id), settings.deadline_s, kill.what)
        procs.kill9(target.pid)
    return batch_id, {"moment": kill.what, "recorded": batch_ledger.lines_recorded(ready.ledger_url, batch_id),
                      "ended": batch_ledger.events_of_batch(ready.ledger_url, batch_id, "batch_ended") > 0}


def killed_run(ready: gateways.Prepared, settings: Settings, data: bytes, kills: list[Kill]) -> dict:
    """The batch through one gateway per kill, each SIGKILLed when its moment comes, then a last
    gateway until the batch ends; what each kill found and the batch's output and error files."""
    batch_id, at_kill, start = "", [], batch_ledger.last_position(ready.ledger_url)
    for life, kill in enumerate(kills):
        batch_id, found = killed_life(ready, settings, data, kill, life, batch_id)
        at_kill.append(found)
    with gateways.serving(ready, log_of(ready, len(kills))) as target:
        started = time.perf_counter()
        client = batch_runs.sdk(target)
        batch = batch_runs.wait_ended(client, batch_id, settings.deadline_s)
        named = batch_runs.outcome_ids(client, batch)
    return {"batch_id": batch_id, "status": batch.status, "kills": at_kill, "named": named,
            "events": batch_ledger.events_after(ready.ledger_url, start),
            "after_last_kill_s": round(time.perf_counter() - started, 2)}


def run(settings: Settings, path: str, lines: int, text: str) -> dict:
    """The kill -9 run of one path, on a fresh ledger; its findings (a row of the table)."""
    ids, data = batch_runs.custom_ids(lines), batch_runs.chat_lines(batch_runs.PATHS[path], lines, text)
    upstream_before = batch_runs.upstream_ids(settings.sim_url)
    try:
        with batch_runs.prepared(settings, f"kill-{path}") as ready:
            kills = kills_of(path, ready, settings, lines)
            outcome = killed_run(ready, settings, data, kills)
            checks = batch_runs.ledger_checks(ready, outcome["batch_id"], ids)
    finally:
        batch_runs.pause_simulator(settings.sim_url, False)
    return {"title": f"{path}, kill -9 ({len(outcome['kills'])}x)", "path": path, "lines": lines, "kill": True,
            "status": outcome["status"], "kills": outcome["kills"], "after_last_kill_s": outcome["after_last_kill_s"],
            "files": batch_runs.each_once(outcome.pop("named"), ids), **checks,
            "events_per_line": round(outcome["events"] / lines, 3),
            "upstream_batches": len(batch_runs.upstream_ids(settings.sim_url) - upstream_before)}
