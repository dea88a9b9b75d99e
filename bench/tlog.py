"""The ledger as a transparency log at scale (issue 40): how fast its Merkle tree is built, how long
a proof takes, how large a checkpoint is, and what the tree growing every second costs a request.

1. Tree building, off the request path: `ledger.tree.grow` from an empty tree over a ledger of
   --events events (SQLite; PostgreSQL too with --postgresql), and `tree.Builder` in memory over
   --builder-leaves synthetic leaves (the hashing and tile-forming alone: a ledger that large on
   disk is not built here), each in a process of its own (events/s, peak RSS from VmHWM).
2. Proofs on that ledger: --proofs random inclusion and consistency proofs as library calls
   (tree.inclusion, tree.consistency), and --http-proofs of each over HTTP from a real
   `gateway serve` (inclusion with an org's admin key), one at a time, p50/p99; every one checked.
3. Checkpoint size: ten signed tree heads recorded at the end of ledgers of --orgs and of
   --wide-orgs streams and of --events events: the bytes of the newest head's event, of its
   published JSON and of GET /v1/ledger/checkpoints (ten heads; over HTTP as well on the big
   ledger), beside what the old per-stream checkpoint would have been there (computed from every
   stream's head, never recorded); and a head of --builder-leaves leaves computed from the
   Builder's root (no ledger that large here).
4. The request path: CPU per chat request of `gateway serve` (its process tree, /proc) under wrk
   (bench.wrk, its own process) with `[ledger] checkpoint_interval_s` = 1 (the tree grown every
   second) and = 0 (never), both serving at once in front of bench.fake_upstream, their wrk runs
   alternating for --rounds rounds.

    python -m bench.tlog [--events 1000000] [--orgs 1000] [--wide-orgs 100000] [--builder-leaves 10000000]
                         [--proofs 2000] [--http-proofs 500] [--duration 10] [--rounds 3] [--postgresql]
                         [--ledger FILE] [--json FILE]

--ledger keeps the big SQLite ledger there and reuses it (its tree emptied before it is grown).
"""

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

from bench import audit_scale, clients, gateways, ledger_check, procs, wrk
from bench.gateways import Prepared
from ledger.signing import Signer

INTERVALS = (1, 0)  # [ledger] checkpoint_interval_s side by side: the tree grown every second, never
ADMIN_ORG = "org_audit_00000"  # bench.audit_scale's first org: its events are proved over HTTP
NO_UPSTREAM = "http://127.0.0.1:9"  # the proofs' gateway is never asked a completion
CONNECTIONS = 32


def step(name: str, *args: object) -> dict:
    """A bench.tlog_steps step in a process of its own: its result, wall and CPU seconds, peak RSS."""
    done = audit_scale.timed([procs.PYTHON, "-m", "bench.tlog_steps", name, *map(str, args)], procs.clean_env())
    return {**json.loads(done.pop("output").splitlines()[-1]), "process_s": done["seconds"],
            "peak_rss_mb": done["peak_rss_mb"]}


def requests_for(events: int, orgs: int) -> int:
    """Requests (three events each) that, after the orgs' three events each, make about `events`."""
    return max(1, (events - 3 * orgs) // 3)


def built(url: str, events: int, orgs: int) -> str:
    """The ledger at `url` with about `events` events over `orgs` orgs, unless it already has them."""
    if asyncio.run(audit_scale.events_in(url)) >= events - 3:
        return "built before"
    started = time.perf_counter()
    asyncio.run(audit_scale.grow(url, requests_for(events, orgs), orgs, 0))
    seconds = time.perf_counter() - started
    return f"built in {seconds:.0f} s"


def empty_tree(path: Path) -> None:
    """No tree over the ledger (a reused one's), so that it is grown from empty."""
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("DELETE FROM merkle_tiles")
        db.execute("DELETE FROM merkle_tree")


# 1. Tree building


def building(url: str, path: Path, args: argparse.Namespace) -> dict:
    empty_tree(path)
    found = {"grow_sqlite": step("grow", url), "builder": step("build", args.builder_leaves)}
    if args.postgresql:
        found["grow_postgresql"] = grown_on_postgresql(args)
    return found


def grown_on_postgresql(args: argparse.Namespace) -> dict:
    url = f"{audit_scale.PG_URL}?schema=tlog_{uuid.uuid4().hex[:8]}"
    try:
        made = built(url, args.events, args.orgs)
        return {**step("grow", url), "built": made}
    finally:
        asyncio.run(audit_scale._drop_schema(url))


# 2. Proofs and 3. checkpoint sizes


def admin_key(config: Path, org_id: str) -> str:
    out = subprocess.run([procs.GATEWAY, "admin", "create-key", org_id, "--admin", "--config", str(config)],
                         cwd=procs.ROOT, env=procs.clean_env(), capture_output=True, text=True, check=True).stdout
    return orjson.loads(out.strip().splitlines()[-1])["api_key"]


def ledger_toml(url: str, upstream: str, key_path: Path, interval: int) -> str:
    extra = f'checkpoint_interval_s = {interval}\nsigning_key = "{key_path}"\n'
    return gateways.gateway_toml(url, upstream, 1, ledger=extra)


def proofs_over_http(url: str, tmp: Path, key_path: Path, count: int) -> dict:
    """`gateway serve` on the big ledger (checkpoints off: its heads stay those recorded), and the
    proofs asked of it by a client process of its own."""
    config = tmp / "proofs.toml"
    config.write_text(ledger_toml(url, NO_UPSTREAM, key_path, 0))
    key = admin_key(config, ADMIN_ORG)
    with gateways.serving(Prepared(url, config, key)) as target:
        return step("http", url, target.url, key, ADMIN_ORG, count)


def checkpoint_sizes(big: str, tmp: Path, key_path: Path, builder: dict, args: argparse.Namespace) -> dict:
    """Tree heads recorded on a ledger of few streams, one of many, and the big one; one computed."""
    found = {}
    for name, orgs in (("streams", args.orgs), ("wide", args.wide_orgs)):
        url = f"sqlite:///{tmp / name}.db"
        built(url, 3 * orgs + 3 * args.small_requests, orgs)
        found[name] = step("sizes", url, key_path)
    found["big"] = step("sizes", big, key_path)
    found["computed"] = step("computed", builder["events"], builder["root"], key_path)
    return found


# 4. The request path's CPU


def cpu_ledger(tmp: Path, upstream: str, key_path: Path, interval: int) -> Prepared:
    url, config = f"sqlite:///{tmp}/cpu-{interval}.db", tmp / f"cpu-{interval}.toml"
    config.write_text(ledger_toml(url, upstream, key_path, interval))
    return Prepared(url, config, gateways.create_org(config))


def request_cpu(tmp: Path, key_path: Path, args: argparse.Namespace) -> dict:
    """Both gateways serving at once, each warmed up; then wrk on each in turn, --rounds times."""
    runs: dict[int, list[dict]] = {interval: [] for interval in INTERVALS}
    with gateways.fake_upstream(tmp, "upstream") as (_, upstream), contextlib.ExitStack() as stack:
        ready = {interval: cpu_ledger(tmp, upstream.url, key_path, interval) for interval in INTERVALS}
        targets = {interval: stack.enter_context(gateways.serving(prepared)) for interval, prepared in ready.items()}
        warm = {interval: wrk.run(t.url, t.key, clients.CHAT_BODY, 8, 1) for interval, t in targets.items()}
        for _ in range(args.rounds):
            for interval, target in targets.items():
                runs[interval].append(clients.closed_loop(target, args.connections, args.duration))
    return {interval: cpu_result(ready[interval], runs[interval], warm[interval]) for interval in INTERVALS}


def cpu_result(ready: Prepared, runs: list[dict], warm: dict) -> dict:
    """The runs, the tree heads the gateway recorded meanwhile, and the ledger's check (one charge
    per answer, the warm-up's included)."""
    answered, in_flight = sum(run["ok"] for run in [warm, *runs]), sum(run["in_flight"] for run in [warm, *runs])
    path = ready.ledger_url.removeprefix("sqlite:///")
    with contextlib.closing(sqlite3.connect(path)) as db:
        heads = db.execute("SELECT COUNT(*) FROM events WHERE stream_id = '$ledger'").fetchone()[0]
        tree_size = (db.execute("SELECT size FROM merkle_tree").fetchone() or (0,))[0]
    return {"runs": runs, "tree_heads": heads, "tree_size": tree_size,
            "ledger": ledger_check.check(ready.ledger_url, ready.config, answered, in_flight)}


# The table


def proof_cell(found: dict) -> str:
    return f"p50 {found['p50_ms']} ms / p99 {found['p99_ms']} ms ({found['count']:,}, each checked)"


def rss(found: dict) -> str:
    return (f"peak RSS {found['peak_rss_growing_mb']} MB growing ({found['rss_before_mb']} MB before; "
            f"the process's peak {found['peak_rss_mb']} MB)")


def grow_row(grown: dict, backend: str) -> tuple[str, ...]:
    return (f"tree.grow from empty, {backend}, {grown['events']:,} events",
            f"{grown['events_per_s']:,} events/s ({grown['seconds']} s)",
            f"{rss(grown)}; root = a rebuild's: {grown['root_matches_rebuild']}")


def building_rows(found: dict) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = [grow_row(found[name], backend) for name, backend in (("grow_sqlite", "SQLite"),
                                                                 ("grow_postgresql", "PostgreSQL")) if name in found]
    b = found["builder"]
    rows.append((f"tree.Builder in memory, {b['events']:,} synthetic leaves",
                 f"{b['events_per_s']:,} events/s ({b['seconds']} s)",
                 f"{rss(b)} (leaf hashes and tiles only, no database)"))
    return [("1. tree building", *row) for row in rows]


def proof_rows(found: dict) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for way, label in (("library", "library call"), ("http", "HTTP, gateway serve, c=1")):
        for kind in ("inclusion", "consistency"):
            note = "the org's admin key" if (way, kind) == ("http", "inclusion") else ""
            rows.append(("2. proofs", f"{kind}, {label}, tree of {found[way]['tree_size']:,}",
                         proof_cell(found[way][kind]), note))
    return rows


def new_sizes(s: dict, extra: str = "") -> str:
    return (f"head event {s['head_event_bytes']:,} B, published {s['published_bytes']:,} B, "
            f"GET /v1/ledger/checkpoints {s['listing_bytes']:,} B ({s['listed']} heads{extra})")


def old_sizes(s: dict) -> str:
    per_stream = s["old_event_bytes"] / s["streams"]
    return (f"old per-stream checkpoint (computed): event {s['old_event_bytes']:,} B ({per_stream:.0f} B a stream), "
            f"published {s['old_published_bytes']:,} B, listing {s['old_listing_bytes']:,} B")


def size_rows(found: dict, http_listing: int) -> list[tuple[str, ...]]:
    rows = []
    for name in ("streams", "wide", "big"):
        s, extra = found[name], f"; {http_listing:,} B over HTTP" if name == "big" else ""
        rows.append((f"{s['streams']:,} streams, {s['events']:,} events", new_sizes(s, extra), old_sizes(s)))
    c = found["computed"]
    rows.append((f"{c['events']:,} leaves (the Builder's root; not recorded)",
                 f"head event {c['head_event_bytes']:,} B, published {c['published_bytes']:,} B", ""))
    return [("3. checkpoint size", *row) for row in rows]


def cpu_row(interval: int, result: dict) -> tuple[str, ...]:
    runs, check = result["runs"], result["ledger"]
    each = ", ".join(f"{run['cpu_us_per_request']:,.0f}" for run in runs)
    mean = sum(run["cpu_us_per_request"] for run in runs) / len(runs)
    rps = sum(run["rps"] for run in runs) / len(runs)
    verdict = "verifies" if check["verify_passed"] else "FAILS"
    return (f"checkpoint_interval_s = {interval}, wrk c={runs[0]['connections']}",
            f"CPU {mean:,.0f} µs/request (runs: {each}); {rps:,.0f} req/s",
            (f"{result['tree_heads']} tree heads recorded, tree of {result['tree_size']:,}; "
             f"ledger {verdict}, one charge per 200: {check['counts_match']}"))


def cpu_rows(found: dict) -> list[tuple[str, ...]]:
    return [("4. request path", *cpu_row(interval, result)) for interval, result in found.items()]


def table(result: dict) -> str:
    rows = [*building_rows(result["building"]), *proof_rows(result["proofs"]),
            *size_rows(result["sizes"], result["proofs"]["http"]["listing_bytes"]), *cpu_rows(result["cpu"])]
    lines = ["| part | measured on | result | beside it |", "|---|---|---|---|"]
    return "\n".join([*lines, *(f"| {' | '.join(row)} |" for row in rows)])


def measure(tmp: Path, args: argparse.Namespace) -> dict:
    key_path = tmp / "log.pem"
    Signer.written_to(key_path)
    path = Path(args.ledger or tmp / "ledger.db").resolve()
    url = f"sqlite:///{path}"
    made = built(url, args.events, args.orgs)
    print(f"ledger of {args.events:,} events: {made}", flush=True)
    result: dict[str, Any] = {"built": made, "cores": os.cpu_count(), "building": building(url, path, args)}
    result["sizes"] = checkpoint_sizes(url, tmp, key_path, result["building"]["builder"], args)
    result["proofs"] = {"library": step("library", url, args.proofs),
                        "http": proofs_over_http(url, tmp, key_path, args.http_proofs)}
    result["cpu"] = request_cpu(tmp, key_path, args)
    return result


def main(args: argparse.Namespace) -> None:
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: `apt-get install -y wrk` (make bench does it)")
    if args.postgresql and not ledger_check.postgres_reachable():
        sys.exit(f"PostgreSQL is not reachable at {audit_scale.PG_URL}")
    with tempfile.TemporaryDirectory(prefix="bench-tlog-") as tmp:
        result = measure(Path(tmp), args)
    print(f"{result['cores']} CPUs; the big ledger {result['built']}\n\n{table(result)}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events of the big ledger")
    parser.add_argument("--orgs", type=int, default=1_000, help="its organizations (and the narrow ledger's)")
    parser.add_argument("--wide-orgs", type=int, default=100_000, help="organizations of the wide ledger")
    parser.add_argument("--small-requests", type=int, default=1_000, help="requests of the narrow and wide ledgers")
    parser.add_argument("--builder-leaves", type=int, default=10_000_000)
    parser.add_argument("--proofs", type=int, default=2_000, help="library proofs of each kind")
    parser.add_argument("--http-proofs", type=int, default=500, help="proofs of each kind over HTTP")
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run (whole)")
    parser.add_argument("--rounds", type=int, default=3, help="wrk runs on each gateway, alternating")
    parser.add_argument("--connections", type=int, default=CONNECTIONS)
    parser.add_argument("--postgresql", action="store_true", help="grow the tree over a PostgreSQL ledger too")
    parser.add_argument("--ledger", help="keep the big SQLite ledger in this file and reuse it")
    parser.add_argument("--json", help="also write the results as JSON to this file")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
