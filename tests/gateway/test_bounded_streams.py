"""Streams relay in bounded memory (issue 25): a quarter of a gigabyte streamed through one
`gateway serve` process, on chat, Messages, Responses and completions, raises its peak RSS by
under 50 MB; what a stream keeps of its text is capped (`KEPT_TEXT_CHARS`, the rest noted as
truncated), and nothing is kept under retention `none`."""

import asyncio
import contextlib
from pathlib import Path
from unittest import mock

import aiohttp
import pytest

from gateway.edge import sse
from gateway.edge.errors import UpstreamError
from gateway.content import KEPT_TEXT_CHARS, KeptText

from tests.gateway.gateway_helpers import gateway_process, run_cli_async, simulator_providers_toml, write_config
from tests.support import auth, clean_env, decimal_json

DELTA = 32 * 1024  # bytes of text in each streamed delta ([sim:chunk_bytes]); lines stay well under aiohttp's cap
DELTAS = 2048  # 64 MiB of text a stream, four routes: 256 MiB through one process
MAX_GROWTH_KB = 50 * 1024
HUGE = f"[sim:tokens={DELTAS}] [sim:chunk_bytes={DELTA}]"
ROUTES = {  # path -> body streaming `directives` on that route
    "/v1/chat/completions": lambda directives: {
        "model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": directives}]},
    "/v1/messages": lambda directives: {
        "model": "gpt-4o-mini", "stream": True, "max_tokens": 100_000,
        "messages": [{"role": "user", "content": directives}]},
    "/v1/responses": lambda directives: {"model": "gemini-2.5-flash", "stream": True, "input": directives},
    "/v1/completions": lambda directives: {
        "model": "gpt-3.5-turbo-instruct", "stream": True, "max_tokens": 100_000, "prompt": directives},
}


def kilobytes(pid: int, field: str) -> int:
    """A memory figure of process `pid` (VmHWM: its peak resident set; VmRSS: its current one)."""
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith(field))
    return int(line.split()[1])


async def cli(config: str, *args: str) -> dict:
    result = await run_cli_async("admin", *args, "--config", config)
    assert result.returncode == 0, result.stderr
    return decimal_json(result.stdout.encode())


@contextlib.asynccontextmanager
async def served(tmp_path, sim_url, retention: str = "retain"):
    """A `gateway serve` process on a SQLite ledger, and an organization's key: (url, key, pid)."""
    ledger = f'[ledger]\nurl = "sqlite:///{tmp_path}/ledger.db"\n'
    config = str(write_config(tmp_path, ledger + simulator_providers_toml(sim_url)))
    org = await cli(config, "create-org", "acme", "--credits-inr", "100000", "--retention", retention)
    async with gateway_process("serve", "--port", "0", "--config", config, env=clean_env()) as gateway:
        yield await gateway.ready_url(), org["api_key"], gateway.proc.pid


async def stream(session: aiohttp.ClientSession, url: str, key: str, path: str, directives: str) -> tuple[int, str]:
    """Stream one answer, reading it as it comes and keeping none of it: (bytes read, request id)."""
    async with session.post(url + path, json=ROUTES[path](directives), headers=auth(key)) as response:
        assert response.status == 200, await response.text()
        read, tail = 0, b""
        async for piece in response.content.iter_any():
            read, tail = read + len(piece), (tail + piece)[-4096:]
        assert b'"error"' not in tail, tail  # the stream ended as it should, not with an error event
        return read, response.headers["X-Request-Id"]


async def test_a_quarter_gigabyte_streams_through_one_gateway_in_bounded_memory(tmp_path, sim_url):
    async with served(tmp_path, sim_url) as (url, key, pid), aiohttp.ClientSession() as session:
        for path in ROUTES:  # every route's code paths warmed up, and a kept text at its cap
            await stream(session, url, key, path, f"[sim:tokens=64] [sim:chunk_bytes={DELTA}]")
        before = kilobytes(pid, "VmHWM")
        sent = [(await stream(session, url, key, path, HUGE))[0] for path in ROUTES]
        growth = kilobytes(pid, "VmHWM") - before
    print(f"streamed {sum(sent) >> 20} MiB; peak RSS {before >> 10} MiB before, grew {growth >> 10} MiB")
    assert all(read > DELTAS * DELTA for read in sent), sent
    assert growth < MAX_GROWTH_KB, f"peak RSS grew {growth} kB streaming {sum(sent)} bytes"


@pytest.mark.parametrize("path", list(ROUTES))
async def test_a_long_stream_keeps_its_text_up_to_the_cap_marked_truncated(tmp_path, sim_url, path):
    async with served(tmp_path, sim_url) as (url, key, _), aiohttp.ClientSession() as session:
        _, request_id = await stream(session, url, key, path, f"[sim:tokens=100] [sim:chunk_bytes={DELTA}]")
        entry = await (await session.get(f"{url}/v1/logs/{request_id}", headers=auth(key))).json()
    assert entry["content_state"] == "kept" and entry["content"]["truncated"] is True
    response = entry["content"]["response"]
    text = response["output"][0]["content"][0]["text"] if path == "/v1/responses" else response[0]
    assert len(text) == KEPT_TEXT_CHARS and text.startswith("the the ")


@pytest.mark.parametrize("path", list(ROUTES))
async def test_retention_none_keeps_nothing_of_a_stream(tmp_path, sim_url, path):
    async with served(tmp_path, sim_url, "none") as (url, key, _), aiohttp.ClientSession() as session:
        _, request_id = await stream(session, url, key, path, f"[sim:tokens=40] [sim:chunk_bytes={DELTA}]")
        entry = await (await session.get(f"{url}/v1/logs/{request_id}", headers=auth(key))).json()
    assert (entry["content_state"], entry["content"]) == ("not_retained", None)


def test_kept_text_keeps_its_first_characters_and_notes_the_cut():
    kept = KeptText(cap=5)
    for text in ["ab", "", "cd", "efg", "h"]:
        kept.add(text)
    assert (kept.text(), kept.truncated, kept.marked({"a": 1})) == ("abcde", True, {"a": 1, "truncated": True})
    short, none = KeptText(cap=5), KeptText(keep=False)
    short.add("abcde")
    none.add("abc")
    assert (short.text(), short.marked({}), none.text(), none.truncated) == ("abcde", {}, "", False)


async def upstream_events(*pieces: bytes) -> list[bytes]:
    """The data of each event `sse.events` reads from an upstream body sent in `pieces`."""
    content = aiohttp.StreamReader(mock.Mock(), 2**16, loop=asyncio.get_running_loop())
    for piece in pieces:
        content.feed_data(piece)
    content.feed_eof()
    return [event.data async for event in sse.events(content)]


async def test_an_upstream_event_is_read_up_to_its_cap_and_refused_beyond():
    long = b"x" * (1 << 20)  # beyond aiohttp's own 128 KiB line limit
    assert await upstream_events(b"data: " + long + b"\n\n", b"data: a\ndata: b\n\n") == [long, b"a\nb"]
    with pytest.raises(UpstreamError, match="over 8 MiB"):
        await upstream_events(b"data: " + b"x" * (sse.MAX_EVENT_BYTES + 1) + b"\n\n")
    with pytest.raises(UpstreamError, match="over 8 MiB"):  # as many lines, each short
        await upstream_events(*[b"data: " + b"x" * 1000 + b"\n"] * (sse.MAX_EVENT_BYTES // 1000 + 1))
