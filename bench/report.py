"""The benchmark's table: one row per configuration; "added" is over the upstream direct (row 1)."""

import os
import platform

DASH = "—"


def machine() -> dict:
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}


def number(value: float | None, digits: int = 0) -> str:
    return DASH if value is None else f"{value:,.{digits}f}"


def get(row: dict, run: str, field: str) -> float | None:
    return row["runs"].get(run, {}).get(field)


def with_added(row: dict, direct: dict, run: str, field: str) -> str:
    """`value (+added)`: the row's value and how much it exceeds the upstream direct's."""
    value, base = get(row, run, field), get(direct, run, field)
    if value is None:
        return DASH
    if row is direct or base is None:
        return number(value, 2)
    return f"{value:,.2f} (+{value - base:,.2f})"


def open_loop(row: dict, direct: dict) -> str:
    run = row["runs"].get("open")
    if run is None:
        return DASH
    served = "served" if run["served"] else f"**only {run['achieved_rps']:,.0f}/s**"
    return f"{served}, p99 {with_added(row, direct, 'open', 'p99_ms')}"


def errors(row: dict) -> int:
    return sum(run.get("non_2xx", 0) + run.get("socket_errors", 0) + run.get("errors", 0)
               + run.get("unfinished", 0) for name, run in row["runs"].items() if name != "warmup")


def ledger(row: dict) -> str:
    check = row.get("ledger")
    if check is None:
        return DASH
    verdict = "ok" if check["verify_passed"] and check["counts_match"] else "**FAIL**"
    return f"{verdict} {check['request_completed']:,}/{check['answered_200']:,}"


COLUMNS = (  # (header, cell of a row given the direct row)
    ("req/s c=32", lambda r, d: number(get(r, "c32", "rps"))),
    ("p50 / p99 c=32 ms", lambda r, d: f"{number(get(r, 'c32', 'p50_ms'), 2)} / {number(get(r, 'c32', 'p99_ms'), 2)}"),
    ("CPU µs/req c=32", lambda r, d: number(get(r, "c32", "cpu_us_per_request"))),
    ("p50 c=1 ms (added)", lambda r, d: with_added(r, d, "c1", "p50_ms")),
    ("CPU µs/req c=1", lambda r, d: number(get(r, "c1", "cpu_us_per_request"))),
    ("open loop: p99 ms (added)", open_loop),
    ("stream TTFT c=1 ms (added)", lambda r, d: with_added(r, d, "stream_c1", "ttft_p50_ms")),
    ("SSE events/s c=32", lambda r, d: number(get(r, "stream_c32", "events_per_s"))),
    ("errors", lambda r, d: str(errors(r))),
    ("ledger events/200s", lambda r, d: ledger(r)),
)


def table(rows: list[dict]) -> str:
    """A Markdown table, configurations as rows; the first row is the upstream direct."""
    direct = rows[0]
    lines = ["| configuration | " + " | ".join(header for header, _ in COLUMNS) + " |",
             "|---|" + "---|" * len(COLUMNS)]
    for row in rows:
        lines.append(f"| {row['title']} | " + " | ".join(cell(row, direct) for _, cell in COLUMNS) + " |")
    return "\n".join(lines)


def hold_line(hold: dict) -> str:
    capped = (f" (capped by the open-files limit of {hold['open_files_limit']:,})"
              if hold["capped_by_open_files"] else "")
    return (f"{hold['streams_open']:,} of {hold['streams_requested']:,} streams open at once through one "
            f"worker: RSS {hold['rss_before_kib'] / 1024:,.0f} -> {hold['rss_open_kib'] / 1024:,.0f} MiB, "
            f"{number(hold['kib_per_stream'], 1)} KiB per stream ({hold['failed']} failed to open){capped}")


def render(result: dict) -> str:
    parts = []
    if result["rows"]:
        parts.append(f"{result['duration_s']} s per run; open loop at {result['rate']:,.0f} req/s; "
                     f"{result['machine']['cpus']} CPUs\n\n" + table(result["rows"]))
    if "hold" in result:
        parts.append(hold_line(result["hold"]))
    return "\n\n".join(parts)


def ledgers_pass(result: dict) -> bool:
    checks = [row["ledger"] for row in result["rows"] if "ledger" in row]
    return all(check["verify_passed"] and check["counts_match"] for check in checks)
