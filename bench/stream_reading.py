"""What reading a streamed answer costs the gateway's CPU, in-process: one long answer's bytes, as
the fake upstream would send them, cut into socket-sized reads and fed through the gateway's own
readers, timed with time.process_time (the least of --repeats passes: the least disturbed).

Readers (each a row of bench.bedrock_stream's table):
  openai   the OpenAI path: OpenAIChatStream over an aiohttp StreamReader (gateway.edge.sse's
           line parsing, JSON, the chunk's shape check, its token count)
  bedrock  the Bedrock path: BedrockChatStream (botocore's EventStreamBuffer, the headers, JSON,
           ConverseChunks, the OpenAI chunk encoded, its token count)
  decoded  gateway.providers.bedrock.events.decoded alone (botocore, the headers, JSON)
  botocore botocore's EventStreamBuffer alone (the frames and both CRCs, nothing read from them)

The reads are cut before the clock starts, and the SSE bytes fed to the StreamReader then too:
what aiohttp costs to receive them is the same for both and not measured here.
"""

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import cast

import aiohttp
from aiohttp.base_protocol import BaseProtocol
from botocore.eventstream import EventStreamBuffer

from bench import fake_upstream
from gateway.providers.bedrock.events import BedrockChatStream, decoded
from gateway.providers.openai.adapter import OpenAIChatStream

READ_KIB = (1, 4, 16, 64)  # 64 KiB: the most the Bedrock adapter asks of its socket at once (READ_BYTES)
READERS = ("openai", "bedrock", "decoded", "botocore")
MIB = 1 << 20
MODEL = "global.anthropic.claude-sonnet-4-5-20250929-v1:0"


class _Reads:
    """A response body already received, handed out `size` bytes a read (a socket's reads)."""

    def __init__(self, reads: list[bytes]) -> None:
        self.reads = reads

    def iter_chunked(self, _n: int) -> AsyncIterator[bytes]:
        return _each(self.reads)


async def _each(reads: list[bytes]) -> AsyncIterator[bytes]:
    for read in reads:
        yield read


class _Response:
    """What the streams use of an aiohttp.ClientResponse: its body and close()."""

    def __init__(self, content: object) -> None:
        self.content = content

    def close(self) -> None:
        pass


def cut(data: bytes, size: int) -> list[bytes]:
    return [data[at:at + size] for at in range(0, len(data), size)]


async def _openai(reads: list[bytes]) -> Callable[[], Awaitable[int]]:
    content = aiohttp.StreamReader(BaseProtocol(asyncio.get_running_loop()), 1 << 30)  # never pauses
    for read in reads:
        content.feed_data(read)
    content.feed_eof()
    stream = OpenAIChatStream(cast(aiohttp.ClientResponse, _Response(content)))

    async def run() -> int:
        return sum([1 async for _ in stream])
    return run


async def _bedrock(reads: list[bytes]) -> Callable[[], Awaitable[int]]:
    response = cast(aiohttp.ClientResponse, _Response(_Reads(reads)))

    async def run() -> int:
        stream = BedrockChatStream(response, "chatcmpl-bench", MODEL, as_json=False)
        await stream.start()
        return sum([1 async for _ in stream])
    return run


async def _decoded(reads: list[bytes]) -> Callable[[], Awaitable[int]]:
    async def run() -> int:
        return sum([1 async for _ in decoded(_each(reads))])
    return run


async def _botocore(reads: list[bytes]) -> Callable[[], Awaitable[int]]:
    async def run() -> int:
        decoder, messages = EventStreamBuffer(), 0
        for read in reads:
            decoder.add_data(read)
            messages += sum(1 for _ in decoder)
        return messages
    return run


PREPARE = {"openai": _openai, "bedrock": _bedrock, "decoded": _decoded, "botocore": _botocore}


def cpu_seconds(reader: str, data: bytes, size: int) -> tuple[float, int]:
    """(CPU seconds, items read) of one pass of `reader` over `data` cut in `size`-byte reads."""
    async def timed() -> tuple[float, int]:
        run = await PREPARE[reader](cut(data, size))
        started = time.process_time()
        items = await run()
        return time.process_time() - started, items
    return asyncio.run(timed())


def answers(tokens: int) -> dict[str, bytes]:
    """One answer of `tokens` tokens in each protocol, the bytes its upstream sends."""
    converse = b"".join(fake_upstream.converse_events(tokens))
    return {"openai": b"".join(fake_upstream.stream_events(tokens)), "bedrock": converse,
            "decoded": converse, "botocore": converse}


def tokens_for(mib: float) -> int:
    """How many tokens make a ConverseStream answer of about `mib` MiB."""
    sample = 1000
    return max(sample // 10, round(mib * MIB * sample / len(answers(sample)["bedrock"])))


def measure(mib: float, repeats: int) -> dict:
    """Each reader's CPU per MiB and per token at each read size, over one answer of ~`mib` MiB."""
    tokens = tokens_for(mib)
    data = answers(tokens)
    result: dict = {"tokens": tokens, "repeats": repeats, "read_kib": list(READ_KIB), "readers": {}}
    for reader in READERS:
        sizes = {}
        for kib in READ_KIB:
            seconds, items = min(cpu_seconds(reader, data[reader], kib * 1024) for _ in range(repeats))
            sizes[str(kib)] = {"cpu_ms_per_mib": round(1000 * seconds * MIB / len(data[reader]), 2),
                               "cpu_us_per_token": round(1e6 * seconds / tokens, 3), "items": items}
        result["readers"][reader] = {"bytes": len(data[reader]),
                                     "bytes_per_token": round(len(data[reader]) / tokens, 1), "reads": sizes}
    return result
