"""Ending a batch: its output and error files written from its lines' records (each line's answer
is its content: gateway.billing.charging.retained), then, in one unit, what remains of its hold
released and the batch ended (BatchEnded). For an org that keeps no text the lines' answers then
leave the ledger: the output file is their only copy, and it expires as every file does.

OpenAI's batches get an output file (the lines answered 200) and an error file (the others, and
those never run when the batch was cancelled or expired); Anthropic's one results file of every
line. A process killed between the files and the end writes them again: the first ones expire.
"""

from collections.abc import AsyncIterator

from gateway.batches import files, progress
from gateway.billing.charging import keeps_text
from gateway.edge.errors import ApiError, anthropic_type
from gateway.jsonio import decode_body, encode
from gateway.services import Services
from ledger import batch_queries, leases
from ledger.batch_queries import BatchRow, LineRow
from ledger.events import BatchEnded, BatchLineError, Event
from ledger.recorder import Append, HoldNotHeld

NEVER_RAN = {"cancelled": ("batch_cancelled", "canceled"), "expired": ("batch_expired", "expired")}


async def finish(services: Services, row: BatchRow, status: str, errors: tuple[BatchLineError, ...] = ()) -> None:
    """Write the batch's files, then end it (its hold's remainder released in the same unit)."""
    output, failures = await _files(services, row, status)
    ended = BatchEnded(batch_id=row.batch_id, status=status, output_file_id=output,  # type: ignore[arg-type]
                       error_file_id=failures, errors=errors)
    await _end(services, row, ended)
    if not keeps_text(services, progress.caller_of(row, "")):
        await services.recorder.remove_text_of(progress.content_prefix(row), services.recorder.clock())


async def _files(services: Services, row: BatchRow, status: str) -> tuple[str, str]:
    """The ids of the output and error files ("" where there is nothing to write)."""
    if row.api == "anthropic":
        return await _write(services, row, "results", _anthropic_lines(services, row, status)), ""
    output = await _write(services, row, "output", _openai_lines(services, row, status, succeeded=True))
    return output, await _write(services, row, "errors", _openai_lines(services, row, status, succeeded=False))


async def _write(services: Services, row: BatchRow, name: str, lines: AsyncIterator[bytes]) -> str:
    first = await anext(lines, None)
    if first is None:
        return ""

    async def chunks() -> AsyncIterator[bytes]:
        yield first
        async for line in lines:
            yield line

    record = await files.write_file(services, row.org_id, row.key_id, purpose="batch_output",
                                    filename=f"{row.batch_id}_{name}.jsonl", chunks=chunks())
    return record.file_id


async def _recorded(services: Services, row: BatchRow, answers: bool = True
                    ) -> AsyncIterator[tuple[LineRow, dict | None]]:
    """Each recorded line, page by page, with its answer when it was answered (status 200) and
    `answers` are wanted (None when it has none kept): an error file reads no answer."""
    after = ""
    while page := await batch_queries.lines(services.recorder, row.batch_id, after):
        wanted = [line.content_id for line in page if answers and line.status == 200]
        bodies = await batch_queries.contents(services.recorder, wanted)
        for line in page:
            kept = bodies.get(line.content_id)
            yield line, decode_body(kept).get("body") if kept else None
        after = page[-1].custom_id


async def _unrun(services: Services, row: BatchRow) -> AsyncIterator[str]:
    """The custom_ids of lines never recorded (the batch stopped before them; none can be named
    once its input file is gone)."""
    done = await batch_queries.recorded(services.recorder, row.batch_id)
    try:
        async for line in progress.input_lines(services, row):
            if line.custom_id not in done:
                yield line.custom_id
    except ApiError:
        return


async def _openai_lines(services: Services, row: BatchRow, status: str, *, succeeded: bool) -> AsyncIterator[bytes]:
    async for line, body in _recorded(services, row, answers=succeeded):
        if (line.status == 200) == succeeded:
            yield _jsonl({"id": "batch_req_" + line.request_id.removeprefix("req_"), "custom_id": line.custom_id,
                          "response": {"status_code": line.status, "request_id": line.request_id,
                                       "body": body if line.status == 200 else _error_body(line)}, "error": None})
    if not succeeded and status in NEVER_RAN:
        code = NEVER_RAN[status][0]
        async for custom_id in _unrun(services, row):
            yield _jsonl({"id": None, "custom_id": custom_id, "response": None,
                          "error": {"code": code, "message": f"the batch was {status} before this request ran"}})


async def _anthropic_lines(services: Services, row: BatchRow, status: str) -> AsyncIterator[bytes]:
    async for line, body in _recorded(services, row):
        result = {"type": "succeeded", "message": body} if line.status == 200 else {
            "type": "errored", "error": {"type": "error", "error": {"type": anthropic_type(line.status),
                                                                    "message": line.error}}}
        yield _jsonl({"custom_id": line.custom_id, "result": result})
    if status in NEVER_RAN:
        async for custom_id in _unrun(services, row):
            yield _jsonl({"custom_id": custom_id, "result": {"type": NEVER_RAN[status][1]}})


def _error_body(line: LineRow) -> dict:
    return {"error": {"message": line.error, "type": "invalid_request_error" if line.status < 500 else "api_error",
                      "code": None, "param": None}}


def _jsonl(item: dict) -> bytes:
    return encode(item) + b"\n"


async def _end(services: Services, row: BatchRow, ended: BatchEnded) -> None:
    """The batch ended, with its hold's remainder released (a hold that lapsed meanwhile aside)."""
    hold = await leases.held(services.recorder, row.hold_id) if row.hold_id else None
    events: list[Event] = [ended]
    if hold is not None:
        events.insert(0, hold.release())
    try:
        await services.writer.append(Append(row.org_id, events))
    except HoldNotHeld:  # it lapsed and was expired between the read and the append
        await services.writer.append(Append(row.org_id, [ended]))
