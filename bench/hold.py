"""Memory per open stream: many concurrent streams through ONE gateway worker.

A fake upstream that holds every stream after its first chunk keeps them open; the gateway
(SQLite, one process) is warmed up (non-streamed load, then a few streams opened and closed),
its RSS read, then `count` streams are opened by a client process and the RSS read again.
"""

import time
from pathlib import Path

from bench import clients, gateways, procs, wrk

HOLD_UPSTREAM_S = "3600"  # longer than any run: the upstream is killed at the end
WARM_STREAMS = 200
SETTLE_S = 1.0
FILES_PER_STREAM = 2  # the gateway holds the client's socket and its upstream socket
SPARE_FILES = 1024


def memory_per_stream(tmp: Path, count: int) -> dict:
    """Open `count` streams through one worker; the RSS it gained per stream, in KiB."""
    (tmp / "hold").mkdir(exist_ok=True)
    limit = procs.raise_open_files(FILES_PER_STREAM * count + SPARE_FILES)  # inherited by all three
    with gateways.fake_upstream(tmp, "hold-upstream", "--hold-s", HOLD_UPSTREAM_S) as (upstream, upstream_target):
        with gateways.prepared("sqlite1", upstream_target.url, tmp / "hold") as ready:
            with gateways.serving(ready) as target:
                result = measure(target, count)
                upstream.kill()  # the held streams end now, so the gateway stops without waiting
                upstream.wait()
    return {**result, "open_files_limit": limit}


def measure(target: gateways.Target, count: int) -> dict:
    wrk.run(target.url, target.key, clients.CHAT_BODY, 8, 1)
    with clients.streams_held(target, WARM_STREAMS):
        pass
    time.sleep(SETTLE_S)
    before = procs.rss_kib(target.pid)
    with clients.streams_held(target, count) as opened:
        time.sleep(SETTLE_S)
        during = procs.rss_kib(target.pid)
    held = opened["streams_open"]
    return {"streams_requested": count, "streams_open": held, "failed": opened["failed"],
            "first_failure": opened.get("first_failure"), "opening_s": opened.get("opening_s"),
            "rss_before_kib": before, "rss_open_kib": during,
            "kib_per_stream": round((during - before) / held, 1) if held else None}
