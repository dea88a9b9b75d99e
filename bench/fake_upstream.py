"""A minimal fake OpenAI chat upstream for benchmarks, as cheap as possible so that the gateway is
what gets measured (the simulator is richer and slower; it is not used here).

POST /v1/chat/completions answers one constant `chat.completion` with usage. A body asking for
`"stream": true` gets an SSE stream instead: a role chunk, --chunks token chunks, a finish chunk,
a usage chunk and `[DONE]`, each written on its own. A stream whose prompt contains `[hold]` is
held open --hold-s seconds after its first chunk (the open-streams memory run).

POST /model/{model id}/converse-stream answers Bedrock's ConverseStream as AWS's binary event
stream (`application/vnd.amazon.eventstream`, framed by the simulator's encoder): messageStart,
the same --chunks token deltas, contentBlockStop, messageStop and metadata (the usage), each
written on its own as the SSE stream's events are, so both answers carry the same tokens at the
same pacing (N+4 writes each).

    python -m bench.fake_upstream [--port 0] [--chunks 16] [--hold-s 3600]

Prints one JSON line {"event": "fake_upstream_ready", "url": ...} on stdout once it listens.
"""

import argparse
import asyncio
import re
import sys

import orjson
from aiohttp import web

from simulator import bedrock_eventstream

READY_EVENT = "fake_upstream_ready"
# The body is never decoded: a search of the raw bytes is enough to tell a stream apart.
STREAM_FLAG = re.compile(rb'"stream"\s*:\s*true')
HOLD_MARK = b"[hold]"
HEAD = {"id": "chatcmpl-bench", "created": 1_700_000_000, "model": "gpt-4o-mini"}
USAGE = {"prompt_tokens": 12, "completion_tokens": 16, "total_tokens": 28}
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


def completion_body() -> bytes:
    message = {"role": "assistant", "content": "a constant benchmark answer of sixteen tokens or so."}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return orjson.dumps({**HEAD, "object": "chat.completion", "choices": [choice], "usage": USAGE})


def sse_event(choices: list, usage: dict | None) -> bytes:
    return b"data: " + orjson.dumps({**HEAD, "object": "chat.completion.chunk",
                                     "choices": choices, "usage": usage}) + b"\n\n"


def token(n: int) -> str:
    """The text of token `n`, the same in both protocols' streams."""
    return f"tok{n} "


def stream_events(chunks: int) -> list[bytes]:
    """Every event of one streamed answer, encoded once at start-up."""
    def delta(content: dict, finish: str | None) -> bytes:
        return sse_event([{"index": 0, "delta": content, "finish_reason": finish}], None)
    tokens = [delta({"content": token(n)}, None) for n in range(chunks)]
    return [delta({"role": "assistant", "content": ""}, None), *tokens, delta({}, "stop"),
            sse_event([], {**USAGE, "completion_tokens": chunks, "total_tokens": 12 + chunks}),
            b"data: [DONE]\n\n"]


def converse_events(chunks: int) -> list[bytes]:
    """Every event-stream message of one ConverseStream answer of `chunks` tokens, encoded once
    (each padded with a random "p" field, as Bedrock pads them)."""
    usage = {"inputTokens": USAGE["prompt_tokens"], "outputTokens": chunks, "totalTokens": 12 + chunks}
    deltas = [bedrock_eventstream.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": token(n)}})
              for n in range(chunks)]
    return [bedrock_eventstream.event("messageStart", {"role": "assistant"}), *deltas,
            bedrock_eventstream.event("contentBlockStop", {"contentBlockIndex": 0}),
            bedrock_eventstream.event("messageStop", {"stopReason": "end_turn"}),
            bedrock_eventstream.event("metadata", {"usage": usage, "metrics": {"latencyMs": 1}})]


async def written(request: web.Request, content_type: str, messages: list[bytes]) -> web.StreamResponse:
    """A 200 answer streaming `messages`, each written on its own."""
    response = web.StreamResponse(headers={"Content-Type": content_type})
    await response.prepare(request)
    for message in messages:
        await response.write(message)
    await response.write_eof()
    return response


def make_app(chunks: int, hold_s: float) -> web.Application:
    body, events, converse = completion_body(), stream_events(chunks), converse_events(chunks)

    async def chat(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        if not STREAM_FLAG.search(raw):
            return web.Response(body=body, content_type="application/json")
        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(request)
        await response.write(events[0])
        if HOLD_MARK in raw:
            await asyncio.sleep(hold_s)
        for event in events[1:]:
            await response.write(event)
        await response.write_eof()
        return response

    async def converse_stream(request: web.Request) -> web.StreamResponse:
        await request.read()  # the request is never looked at, but read as a real server would
        return await written(request, bedrock_eventstream.CONTENT_TYPE, converse)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/model/{model}/converse-stream", converse_stream)
    return app


async def serve_app(app: web.Application, port: int, ready_event: str) -> None:
    """Serve `app` on 127.0.0.1:`port` (0: any) until killed; one JSON line {"event": ready_event,
    "url": ...} on stdout once it listens (what bench.procs waits for)."""
    runner = web.AppRunner(app, access_log=None, handle_signals=True)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    port = runner.addresses[0][1]
    sys.stdout.write(orjson.dumps({"event": ready_event, "url": f"http://127.0.0.1:{port}"}).decode() + "\n")
    sys.stdout.flush()
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chunks", type=int, default=16, help="token chunks per streamed answer")
    parser.add_argument("--hold-s", type=float, default=3600.0,
                        help="how long a stream asking for [hold] pauses after its first chunk")
    import uvloop
    args = parser.parse_args()
    uvloop.run(serve_app(make_app(args.chunks, args.hold_s), args.port, READY_EVENT))


if __name__ == "__main__":
    main()
