"""A batch as each API shows it: OpenAI's batch object and Anthropic's message_batch, both read off
the `batches` projection, with the gateway's cost so far beside the providers' fields."""

from datetime import UTC, datetime

import msgspec

from gateway.jsonio import number
from ledger.batch_queries import BatchRow
from ledger.money import from_nano

US = 1_000_000


def _seconds(us: int | None) -> int | None:
    return None if us is None else us // US


def _rfc3339(us: int | None) -> str | None:
    return None if us is None else datetime.fromtimestamp(us / US, UTC).isoformat().replace("+00:00", "Z")


def _errors(row: BatchRow) -> dict | None:
    if not row.errors:
        return None
    return {"object": "list", "data": [{"code": e.get("code"), "message": e.get("message"),
                                         "param": e.get("param") or None, "line": e.get("line") or None}
                                        for e in msgspec.json.decode(row.errors)]}


def _when(row: BatchRow, status: str) -> int | None:
    return _seconds(row.ended_at_us) if row.status == status else None


def openai_batch(row: BatchRow) -> dict:
    """OpenAI's batch object."""
    failed = row.status == "failed"
    return {
        "id": row.batch_id, "object": "batch", "endpoint": row.endpoint, "model": row.model, "errors": _errors(row),
        "input_file_id": row.input_file_id, "completion_window": row.completion_window, "status": row.state,
        "output_file_id": row.output_file_id or None, "error_file_id": row.error_file_id or None,
        "created_at": _seconds(row.created_at_us), "in_progress_at": None if failed else _seconds(row.created_at_us),
        "expires_at": _seconds(row.expires_at_us), "finalizing_at": _when(row, "completed"),
        "completed_at": _when(row, "completed"), "failed_at": _when(row, "failed"), "expired_at": _when(row, "expired"),
        "cancelling_at": _seconds(row.cancel_requested_at_us), "cancelled_at": _when(row, "cancelled"),
        "request_counts": {"total": row.lines, "completed": row.succeeded, "failed": row.failed},
        "metadata": msgspec.json.decode(row.metadata) or None, "usage": _usage(row), **cost(row)}


def _usage(row: BatchRow) -> dict:
    return {"input_tokens": row.prompt_tokens, "output_tokens": row.completion_tokens,
            "total_tokens": row.prompt_tokens + row.completion_tokens,
            "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}


def cost(row: BatchRow) -> dict:
    """What the batch's lines were charged so far, and where it runs."""
    return {"cost_inr": number(from_nano(row.charged_inr_nano)), "provider": row.provider, "native": bool(row.native)}


def anthropic_batch(row: BatchRow, base_url: str) -> dict:
    """Anthropic's message_batch object; `base_url` is where the client reached the gateway."""
    ended = row.ended_at_us is not None
    unrun = row.lines - row.succeeded - row.failed
    return {
        "id": row.batch_id, "type": "message_batch",
        "processing_status": "ended" if ended else ("canceling" if row.cancel_requested_at_us else "in_progress"),
        "request_counts": {"processing": 0 if ended else unrun, "succeeded": row.succeeded, "errored": row.failed,
                           "canceled": unrun if ended and row.status == "cancelled" else 0,
                           "expired": unrun if ended and row.status == "expired" else 0},
        "ended_at": _rfc3339(row.ended_at_us), "created_at": _rfc3339(row.created_at_us),
        "expires_at": _rfc3339(row.expires_at_us), "archived_at": None,
        "cancel_initiated_at": _rfc3339(row.cancel_requested_at_us),
        "results_url": f"{base_url}/v1/messages/batches/{row.batch_id}/results" if ended else None, **cost(row)}
