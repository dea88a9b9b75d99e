"""Builders and helpers shared by the ledger tests (not a test module)."""

import contextlib
import hashlib
import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from ledger import projections
from ledger.events import (
    ApiKeyCreated, ApiKeyRevoked, CreditsAdded, CreditsHeld, Event, HoldReleased, IdempotencyKeyClaimed,
    IdempotencyKeyReleased, MediaExpired, MusicTrackRecorded, OrgCreated, RequestCompleted, RetentionChanged,
)
from ledger.recorder import Append, Content, Recorded, Recorder, SchemaOutOfDate


def org(name: str = "Acme", retention: str = "retain") -> OrgCreated:
    return OrgCreated(name=name, retention=retention)


def key(key_id: str, *, admin: bool = False, name: str = "") -> ApiKeyCreated:
    return ApiKeyCreated(key_id=key_id, key_hash=hashlib.sha256(key_id.encode()).hexdigest(),
                         prefix=key_id[:6], name=name, admin=admin)


def revoke(key_id: str) -> ApiKeyRevoked:
    return ApiKeyRevoked(key_id=key_id)


def credits(amount_inr_nano: int, note: str = "") -> CreditsAdded:
    return CreditsAdded(amount_inr_nano=amount_inr_nano, note=note)


def retention(value: str) -> RetentionChanged:
    return RetentionChanged(retention=value)


def request(request_id: str, *, charged: int = 0, key_id: str = "k1", status: int = 200,
            content_id: str = "", **fields) -> RequestCompleted:
    return RequestCompleted(request_id=request_id, key_id=key_id, route="/v1/chat/completions",
                            model="gpt-test", provider="sim", status=status, charged_inr_nano=charged,
                            content_id=content_id, **fields)


def hold(hold_id: str, amount_inr_nano: int) -> CreditsHeld:
    return CreditsHeld(hold_id=hold_id, request_id=f"req-{hold_id}", amount_inr_nano=amount_inr_nano)


def release(hold_id: str, amount_inr_nano: int) -> HoldReleased:
    return HoldReleased(hold_id=hold_id, amount_inr_nano=amount_inr_nano)


def music(request_id: str, **fields) -> MusicTrackRecorded:
    return MusicTrackRecorded(request_id=request_id, model="tune-3-clip-preview", provider="google",
                              storage="s3", object_key=f"acme/{request_id}.mp3", size=3, etag='"e"', **fields)


def claim(idempotency_key: str, request_id: str, request_hash: str = "h", lease_us: int = 60_000_000
          ) -> IdempotencyKeyClaimed:
    return IdempotencyKeyClaimed(idempotency_key=idempotency_key, request_hash=request_hash,
                                 request_id=request_id, lease_us=lease_us)


def unclaim(idempotency_key: str, request_id: str) -> IdempotencyKeyReleased:
    return IdempotencyKeyReleased(idempotency_key=idempotency_key, request_id=request_id)


def expired(request_id: str) -> MediaExpired:
    return MediaExpired(request_id=request_id, object_key=f"acme/{request_id}.mp3")


def content(content_id: str, body: bytes) -> Content:
    return Content(content_id, body, hashlib.sha256(body).hexdigest())


def unit(stream_id: str, *events: Event, expected_version: int | None = None,
         contents: Sequence[Content] = ()) -> Append:
    return Append(stream_id, list(events), expected_version, tuple(contents))


def recorded_of(outcomes: Sequence) -> list[Recorded]:
    """Every recorded event of the accepted outcomes, in order."""
    return [r for outcome in outcomes if not isinstance(outcome, Exception) for r in outcome]


async def projection_tables(recorder: Recorder) -> dict[str, list[tuple]]:
    """Every projection table, every row, in a stable order."""
    return {table: [tuple(row) for row in await recorder._fetch(projections.select_all(table))]
            for table in projections.TABLES}


async def append_ok(recorder: Recorder, *units: Append) -> list[list[Recorded]]:
    """Append units that must all be accepted; returns their recorded events."""
    outcomes = await recorder.append(list(units))
    for outcome in outcomes:
        if isinstance(outcome, Exception):
            raise outcome
    return outcomes


# What `populate` writes: positions 1-4 acme, 5-6 beta, 7 acme, 8 beta, 9-10 acme, 11 beta.
POPULATED = 11
HELLO_POSITION = 4  # acme v4: CreditsAdded(1 INR, note "hello")


async def populate(recorder: Recorder) -> list[list[Recorded]]:
    """A small ledger touching every projection: two orgs, keys, credits, requests, content."""
    return [
        *await append_ok(recorder,
                         unit("acme", org("Acme"), key("k1", name="ci"), key("k2", admin=True),
                              credits(1_000_000_000, "hello")),
                         unit("beta", org("Beta", "none"), credits(5))),
        *await append_ok(recorder,
                         unit("acme", request("r1", charged=120, prompt_tokens=3, content_id="c1"),
                              contents=[content("c1", b"prompt and response")]),
                         unit("beta", request("r2", key_id="k9", status=502, error="upstream failed"))),
        *await append_ok(recorder, unit("acme", revoke("k1"), retention("none")),
                         unit("beta", retention("retain"))),
    ]


@contextlib.asynccontextmanager
async def upgraded_from(contract, tmp_path: Path, version: int, *changes: str) -> AsyncIterator[Recorder]:
    """The contract's (closed) store set back to schema `version` by `changes`: a recorder that
    may not migrate refuses it, then the recorder that upgraded it, closed afterwards."""
    for sql in (*changes, "DELETE FROM ledger_schema",
                f"INSERT INTO ledger_schema (version, applied_at_us) VALUES ({version}, 0)"):
        await contract.execute_raw(tmp_path, sql)
    with pytest.raises(SchemaOutOfDate):
        await contract.make_recorder(tmp_path).open(migrate=False)
    upgraded = contract.make_recorder(tmp_path)
    await upgraded.open()
    try:
        yield upgraded
    finally:
        await upgraded.close()


def run_sql(path: Path | str, *statements: tuple[str, Sequence] | str) -> None:
    """Run SQL on a SQLite file through its own connection, bypassing the ledger."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None, timeout=30)) as db:
        for statement in statements:
            sql, params = (statement, ()) if isinstance(statement, str) else statement
            db.execute(sql, tuple(params))
