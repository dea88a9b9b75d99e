"""Memory per open stream: many concurrent streams through ONE gateway worker.

The fake upstream holds the streams that ask for it after their first chunk; the gateway (SQLite,
one process) is warmed up (non-streamed and streamed load), its RSS read, then `count` held
streams are opened by a client process and the RSS read again.
"""

import time
from pathlib import Path

from bench import clients, gateways, procs, wrk

WARM_STREAMS = 32
SETTLE_S = 1.0
FILES_PER_STREAM = 2  # the gateway holds the client's socket and its upstream socket


def memory_per_stream(tmp: Path, requested: int) -> dict:
    """Open `requested` streams (fewer if the open-files limit cannot hold them) through one
    worker; the RSS it gained per stream, in KiB."""
    (tmp / "hold").mkdir(exist_ok=True)
    limit = procs.raise_open_files(FILES_PER_STREAM * requested + procs.SPARE_FILES)  # inherited by all three
    # Past the limit the gateway's accepts fail and back off: fewer streams measure the same thing.
    count = min(requested, (limit - procs.SPARE_FILES) // FILES_PER_STREAM)
    with (gateways.fake_upstream(tmp, "hold-upstream") as (upstream, upstream_target),
          gateways.prepared("sqlite1", upstream_target.url, tmp / "hold") as ready,
          gateways.serving(ready) as target):
        result = measure(target, count)
        upstream.kill()  # the held streams end now (an hour early), so the gateway can stop
        upstream.wait()
    return {**result, "open_files_limit": limit, "streams_asked": requested,
            "capped_by_open_files": count < requested}


def measure(target: gateways.Target, count: int) -> dict:
    wrk.run(target.url, target.key, clients.CHAT_BODY, 8, 1)
    clients.streamed(target, WARM_STREAMS, 1)
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
