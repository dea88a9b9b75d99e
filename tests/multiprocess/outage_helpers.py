"""Helpers for the outage tests: concurrent chat traffic, and what each answer may be.

An answer during an outage is one of three things, and nothing else:
- "charged": a 200 that completed (a JSON body with usage, or a stream ending in usage and
  [DONE]); its request id must have exactly one RequestCompleted in the ledger;
- "refused": a JSON 503 with Retry-After; nothing charged, then or later;
- "cut short": a stream already under way whose charge could not be recorded, ending with an
  error event saying nothing was charged, and [DONE]; nothing charged, then or later.
"""

import asyncio
import time
from collections import Counter

import aiohttp
import msgspec
import orjson

from ledger.events import RequestCompleted
from tests.support import auth, chat_body


class Answer(msgspec.Struct, frozen=True):
    status: int
    content_type: str
    retry_after: str
    request_id: str
    body: bytes
    seconds: float
    stream: bool
    started: float  # monotonic


async def chat(client, key: str, n: int, text: str = "hello") -> Answer:
    """One chat request through `client` (an aiohttp client or test client); every other one streamed."""
    stream, started = n % 2 == 0, time.monotonic()
    body = chat_body(f"{text} {n} [sim:tokens=3]", stream=stream,
                     **({"stream_options": {"include_usage": True}} if stream else {}))
    async with client.post("/v1/chat/completions", json=body, headers=auth(key)) as response:
        payload = await response.read()
        return Answer(response.status, response.content_type, response.headers.get("Retry-After", ""),
                      response.headers.get("X-Request-Id", ""), payload, time.monotonic() - started,
                      stream, started)


async def chat_or_none(client, key: str, n: int) -> Answer | None:
    """`chat`, or None when the server went away before the answer was complete."""
    try:
        return await chat(client, key, n)
    except (TimeoutError, aiohttp.ClientError):
        return None


async def load(client, key: str, stop: asyncio.Event, clients: int = 6, send=chat) -> list[Answer]:
    """`clients` loops sending chats back to back until `stop` is set; every answer `send`
    returned (None answers are left out)."""
    answers: list[Answer] = []

    async def loop(first: int) -> None:
        n = first
        while not stop.is_set():
            if (answer := await send(client, key, n)) is not None:
                answers.append(answer)
            else:
                await asyncio.sleep(0.01)  # the server is gone: do not spin while it is
            n += clients
    await asyncio.gather(*(loop(i) for i in range(clients)))
    return answers


def sse_data(body: bytes) -> list[bytes]:
    return [line.removeprefix(b"data: ") for line in body.split(b"\n") if line.startswith(b"data: ")]


def outcome(answer: Answer) -> str:
    """"charged", "refused" or "cut short"; anything else fails the test with the answer."""
    if answer.status == 503:
        assert answer.content_type == "application/json" and answer.retry_after, answer
        error = orjson.loads(answer.body)["error"]
        assert error["type"] == "service_unavailable" and "nothing was charged" in error["message"], answer
        return "refused"
    assert answer.status == 200, answer
    if not answer.stream:
        assert orjson.loads(answer.body)["usage"]["total_tokens"] > 0, answer
        return "charged"
    frames = sse_data(answer.body)
    assert frames and frames[-1] == b"[DONE]", answer  # never a silent cut
    last = orjson.loads(frames[-2])
    if "error" in last:
        assert last["error"]["type"] == "service_unavailable", answer
        assert "nothing was charged" in last["error"]["message"], answer
        return "cut short"
    assert last["usage"]["total_tokens"] > 0, answer
    return "charged"


def charges_by_request(recorded: list) -> Counter:
    return Counter(r.event.request_id for r in recorded if isinstance(r.event, RequestCompleted))


def charged_requests(recorded: list) -> set[str]:
    """The request ids whose record charged the organization something."""
    return {r.event.request_id for r in recorded if isinstance(r.event, RequestCompleted) and r.event.charged_inr_nano}


def assert_every_charge_accounted_for(answers: list[Answer], recorded: list) -> Counter:
    """What each client was told and what the ledger recorded agree: every charged answer has
    exactly one RequestCompleted, charged; every refused or cut-short one has none that charged
    anything (an uncharged record of it may be there); no request has two records. Returns the
    answers counted by outcome."""
    counts, charged = charges_by_request(recorded), charged_requests(recorded)
    assert max(counts.values(), default=0) <= 1, "a request was recorded twice"
    outcomes = Counter()
    for answer in answers:
        kind = outcome(answer)
        outcomes[kind] += 1
        assert (answer.request_id in charged) == (kind == "charged"), (kind, answer)
        if kind == "charged":
            assert counts[answer.request_id] == 1, answer
    return outcomes


def balance_matches_charges(recorded: list, org_id: str, credits_nano: int, balance_nano: int) -> bool:
    charged = sum(r.event.charged_inr_nano for r in recorded
                  if isinstance(r.event, RequestCompleted) and r.stream_id == org_id)
    return balance_nano == credits_nano - charged
