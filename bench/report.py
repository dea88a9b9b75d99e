"""The benchmark's table: one row per configuration, added latency against the upstream direct."""

import os
import platform

DASH = "—"


def machine() -> dict:
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}


def number(value: float | None, digits: int = 0) -> str:
    return DASH if value is None else f"{value:,.{digits}f}"


def added(row: dict, direct: dict, run: str, field: str) -> float | None:
    """How much `field` of `run` exceeds the upstream direct's (None for the direct row itself)."""
    if row is direct or run not in row["runs"] or run not in direct["runs"]:
        return None
    return row["runs"][run][field] - direct["runs"][run][field]


def get(row: dict, run: str, field: str) -> float | None:
    return row["runs"].get(run, {}).get(field)


def errors(row: dict) -> int:
    return sum(run.get("non_2xx", 0) + run.get("socket_errors", 0) + run.get("errors", 0)
               for name, run in row["runs"].items() if name != "warmup")


def ledger(row: dict) -> str:
    check = row.get("ledger")
    if check is None:
        return DASH
    counts = f"{check['request_completed']}/{check['answered_200']}"
    return f"{'ok' if check['verify_passed'] and check['counts_match'] else 'FAIL'} {counts}"


COLUMNS = (  # (header, cell of a row given the direct row)
    ("req/s c=32", lambda r, d: number(get(r, "c32", "rps"))),
    ("p50 c=32 ms", lambda r, d: number(get(r, "c32", "p50_ms"), 2)),
    ("p99 c=32 ms", lambda r, d: number(get(r, "c32", "p99_ms"), 2)),
    ("CPU µs/req c=32", lambda r, d: number(get(r, "c32", "cpu_us_per_request"))),
    ("req/s c=1", lambda r, d: number(get(r, "c1", "rps"))),
    ("p50 c=1 ms", lambda r, d: number(get(r, "c1", "p50_ms"), 2)),
    ("added p50 c=1 ms", lambda r, d: number(added(r, d, "c1", "p50_ms"), 2)),
    ("CPU µs/req c=1", lambda r, d: number(get(r, "c1", "cpu_us_per_request"))),
    ("errors", lambda r, d: str(errors(r))),
    ("ledger events/200s", lambda r, d: ledger(r)),
)


def table(rows: list[dict]) -> str:
    """A Markdown table: configurations as rows (the first row is the upstream direct)."""
    direct = rows[0]
    lines = ["| configuration | " + " | ".join(header for header, _ in COLUMNS) + " |",
             "|---|" + "---|" * len(COLUMNS)]
    for row in rows:
        lines.append(f"| {row['title']} | " + " | ".join(cell(row, direct) for _, cell in COLUMNS) + " |")
    return "\n".join(lines)
