"""A provider's header values reach the client parsed and re-rendered, never copied: Retry-After as
whole seconds (given as seconds or as an HTTP date), the speech audio's Content-Type as a media type
and its plain parameters; anything else is dropped (gateway/edge/upstream_headers.py).

The HTTP tests put a raw TCP upstream in front of the gateway, so its header bytes are exactly the
hostile ones (an aiohttp upstream would refuse to send some of them)."""

import asyncio
import contextlib
import email.utils
import re
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from hypothesis import example, given, strategies as st

from gateway.edge.errors import UpstreamError
from gateway.edge.upstream_headers import (
    FALLBACK_CONTENT_TYPE,
    MAX_RETRY_AFTER_S,
    content_type,
    retry_after,
    retry_after_seconds,
)
from tests.support import auth, chat_body, single_attempt

NOW = 1_800_000_000.0
HOSTILE = ["1\u2028X-Injected: 1", "1, X-Injected: 1", "1,2", "soon", "²", "١", "1.5", "-1", "0x10", "+5",
           "99999999999999999999", str(MAX_RETRY_AFTER_S + 1), "1\r", "Wed, 21 Oct 2015 07:28:00 GMT\u2028"]
RENDERED_MEDIA = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+/[!#$%&'*+.^_`|~0-9a-z-]+"
                            r"(; [!#$%&'*+.^_`|~0-9a-z-]+=[!#$%&'*+.^_`|~0-9A-Za-z-]+)*")


def http_date(when: datetime) -> str:
    return email.utils.format_datetime(when, usegmt=True)


# -- the parser -------------------------------------------------------------------------------------

@given(st.text())
@example("1\u2028X-Injected: 1")
@example("1, X-Injected: 1")
@example("1\r\nX-Injected: 1")
@example("²")
@example("١٢")
@example("9" * 5000)
@example("Mon, 01 Jan 0001 00:00:00 GMT")
@example("Fri, 31 Dec 9999 23:59:59 -0000")
def test_any_text_is_whole_seconds_in_ascii_digits_or_nothing(text):
    rendered = retry_after(text, NOW)
    assert rendered is None or (re.fullmatch(r"[0-9]+", rendered) and int(rendered) <= MAX_RETRY_AFTER_S
                                and rendered == str(int(rendered)))


@given(st.integers(min_value=0, max_value=MAX_RETRY_AFTER_S), st.sampled_from(["", " ", "\t", "  "]))
def test_whole_seconds_are_kept(seconds, padding):
    assert retry_after(f"{padding}{seconds}{padding}", NOW) == str(seconds)
    assert retry_after(f"00{seconds}", NOW) == str(seconds)


@given(st.integers(min_value=MAX_RETRY_AFTER_S + 1))
def test_a_wait_beyond_the_bound_is_dropped(seconds):
    assert retry_after(str(seconds), NOW) is None


@pytest.mark.parametrize("value", HOSTILE)
def test_a_value_that_is_not_seconds_or_a_date_is_dropped(value):
    assert retry_after(value, NOW) is None


@given(st.text(st.characters(categories=["Nd"], exclude_characters="0123456789"), min_size=1))
def test_digits_of_other_scripts_are_not_seconds(digits):
    assert retry_after(digits, NOW) is None


@given(st.integers(min_value=0, max_value=9), st.sampled_from(["\u2028", "\r", "\n", ",", ";", "\x00", " x"]),
       st.text(max_size=10))
def test_a_number_with_anything_after_it_is_dropped(number, separator, rest):
    assert retry_after(f"{number}{separator}{rest}", NOW) is None


@given(st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30)))
def test_an_http_date_is_the_whole_seconds_until_it(naive):
    when = naive.replace(tzinfo=UTC, microsecond=0)
    left = max(0, int(when.timestamp() - NOW))
    assert retry_after_seconds(http_date(when), NOW) == (left if left <= MAX_RETRY_AFTER_S else None)


def test_a_date_in_the_past_is_zero_and_one_soon_its_seconds():
    now = datetime.fromtimestamp(NOW, UTC)
    assert retry_after(http_date(now - timedelta(days=3)), NOW) == "0"
    assert retry_after(http_date(now + timedelta(seconds=90)), NOW) == "90"


@pytest.mark.parametrize("value", [*HOSTILE, "7", None])
def test_an_upstream_error_keeps_only_the_re_rendered_value(value):
    error = UpstreamError(429, "openai returned 429", retry_after=value)
    expected = {"Retry-After": value} if value == "7" else {}
    assert error.retry_after == (value if value == "7" else None)
    assert dict(error.to_api_error("openai", "gpt-4o-mini").headers or {}) == expected


@given(st.text())
@example("audio/mpeg\r\nX-Injected: 1")
@example("audio/mpeg\u2028")
@example("audio/mpeg, text/html")
@example('audio/L16; rate=24000; name="x\\"y"')
def test_any_content_type_renders_as_a_plain_media_type(text):
    rendered = content_type(text)
    assert rendered == FALLBACK_CONTENT_TYPE or RENDERED_MEDIA.fullmatch(rendered)


def test_a_content_type_keeps_its_media_type_and_plain_parameters():
    assert content_type("Audio/MPEG") == "audio/mpeg"
    assert content_type("audio/L16;rate=24000; q=\"a b\"") == "audio/l16; rate=24000"
    assert content_type("audio/mpeg, text/html") == content_type(None) == FALLBACK_CONTENT_TYPE


# -- through the gateway ----------------------------------------------------------------------------

@contextlib.asynccontextmanager
async def raw_upstream(status_line: bytes, headers: list[bytes], body: bytes) -> AsyncIterator[str]:
    """A loopback HTTP server answering every request with exactly these bytes; yields its URL."""
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?i)\r\ncontent-length: *([0-9]+)", head)
        await reader.readexactly(int(length.group(1)) if length else 0)
        writer.write(b"\r\n".join([status_line, *headers, b"Content-Length: %d" % len(body), b"Connection: close",
                                   b"", body]))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"


async def gateway_at(make_gateway, config, url: str):
    openai = msgspec.structs.replace(config.providers["openai"], base_url=url)
    gateway = await make_gateway(single_attempt(msgspec.structs.replace(config, providers={**config.providers,
                                                                                          "openai": openai})))
    return gateway, await gateway.new_org("10")


def assert_headers_ascii(response) -> None:
    assert all(name.isascii() and value.isascii() and b"\r" not in value and b"\n" not in value
               for name, value in response.raw_headers)
    assert "X-Injected" not in response.headers


RATE_LIMITED = b'{"error": {"message": "slow down", "type": "rate_limit_error"}}'


@pytest.mark.parametrize("sent,relayed", [
    *[(value.encode(), None) for value in HOSTILE if "\r" not in value],
    (b"7", "7"),
    (b"  12  ", "12"),
    (http_date(datetime(2015, 10, 21, tzinfo=UTC)).encode(), "0"),
])
async def test_a_429s_retry_after_reaches_the_client_re_rendered_or_not_at_all(make_gateway, config, sent, relayed):
    headers = [b"Content-Type: application/json", b"Retry-After: " + sent]
    async with raw_upstream(b"HTTP/1.1 429 Too Many Requests", headers, RATE_LIMITED) as url:
        gateway, org = await gateway_at(make_gateway, config, url)
        response = await gateway.client.post("/v1/chat/completions", json=chat_body(), headers=auth(org["api_key"]))
        assert response.status == 429
        assert response.headers.getall("Retry-After", []) == ([relayed] if relayed else [])
        assert_headers_ascii(response)


async def test_a_retry_after_date_to_come_is_its_seconds(make_gateway, config):
    soon = http_date(datetime.now(UTC) + timedelta(seconds=120)).encode()
    async with raw_upstream(b"HTTP/1.1 429 Too Many Requests", [b"Retry-After: " + soon], RATE_LIMITED) as url:
        gateway, org = await gateway_at(make_gateway, config, url)
        response = await gateway.client.post("/v1/chat/completions", json=chat_body(), headers=auth(org["api_key"]))
    assert response.status == 429 and 100 <= int(response.headers["Retry-After"]) <= 120


@pytest.mark.parametrize("sent,relayed", [
    (b"audio/mpeg", "audio/mpeg"),
    (b"Audio/MPEG; charset=x, text/html", "audio/mpeg"),
    (b"audio/mpeg, text/html", FALLBACK_CONTENT_TYPE),
    ("audio/mpeg\u2028X-Injected: 1".encode(), FALLBACK_CONTENT_TYPE),
    (b"audio/mpeg; X-Injected: 1", "audio/mpeg"),
])
async def test_the_speech_audios_content_type_is_re_rendered(make_gateway, config, sent, relayed):
    async with raw_upstream(b"HTTP/1.1 200 OK", [b"Content-Type: " + sent], b"\xff\xfb" * 100) as url:
        gateway, org = await gateway_at(make_gateway, config, url)
        body = {"model": "tts-1", "input": "hello there", "voice": "alloy"}
        response = await gateway.client.post("/v1/audio/speech", json=body, headers=auth(org["api_key"]))
        assert response.status == 200 and await response.read() == b"\xff\xfb" * 100
        assert response.headers["Content-Type"] == relayed
        assert_headers_ascii(response)


def test_the_clock_is_read_when_no_time_is_given():
    assert retry_after(http_date(datetime.fromtimestamp(time.time() + 3600, UTC))) in {"3599", "3600", "3601"}
