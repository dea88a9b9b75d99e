"""Whatever is done to an export, the offline check (ledger.export_check) says which line: any one
byte changed, any event but the last dropped, any two swapped (hypothesis, over a real export of
a SQLite ledger). Dropping the last event is what only a checkpoint shows (export_contract)."""

import asyncio
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.backends.sqlite import SQLiteRecorder
from ledger.export_check import Mismatch, check
from tests.ledger.export_contract import billed, exported


@pytest.fixture(scope="module")
def lines(tmp_path_factory) -> list[bytes]:
    async def build(path: Path) -> list[bytes]:
        recorder = SQLiteRecorder(str(path))
        await recorder.open()
        try:
            await billed(recorder)
            return await exported(recorder)
        finally:
            await recorder.close()
    return asyncio.run(build(tmp_path_factory.mktemp("export") / "ledger.db"))


def first_mismatch(lines: list[bytes]) -> Mismatch:
    with pytest.raises(Mismatch) as caught:
        check(b"".join(lines).splitlines(keepends=True))  # as read from a file: a new newline splits a line
    return caught.value


@settings(max_examples=300)
@given(st.data())
def test_any_changed_byte_is_found_on_its_line(lines, data):
    assert check(lines)["ok"]
    index = data.draw(st.integers(0, len(lines) - 1))
    at = data.draw(st.integers(0, len(lines[index]) - 2))  # not the newline that ends the line
    byte = data.draw(st.integers(0, 255).filter(lambda b: b != lines[index][at]))
    changed = list(lines)
    changed[index] = lines[index][:at] + bytes([byte]) + lines[index][at + 1:]
    assert first_mismatch(changed).line == index + 1


@given(st.data())
def test_any_event_but_the_last_dropped_is_found_where_it_was(lines, data):
    index = data.draw(st.integers(0, len(lines) - 2))
    found = first_mismatch(lines[:index] + lines[index + 1:])
    assert found.line == index + 1 and "missing" in found.why


@given(st.data())
def test_any_two_events_swapped_are_found_at_the_first(lines, data):
    first = data.draw(st.integers(0, len(lines) - 2))
    second = data.draw(st.integers(first + 1, len(lines) - 1))
    swapped = list(lines)
    swapped[first], swapped[second] = lines[second], lines[first]
    assert first_mismatch(swapped).line == first + 1
