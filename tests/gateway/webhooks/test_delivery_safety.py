"""Where a webhook may go and how one is sent (gateway.webhooks.destinations, sending, signing,
backoff), against real sockets: no private, loopback or link-local address before or after DNS
unless the operator allows the host, no plain HTTP unless allowed, no redirect followed, no proxy
taken from the environment, a bounded wait and a bounded read; signatures as the Standard Webhooks
spec has them; retries spread by jitter and stopped after the configured time."""

import asyncio
import base64
import hashlib
import hmac
import ipaddress
import time

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from gateway.webhooks import backoff, destinations, signing
from gateway.webhooks.destinations import DestinationRefused, Policy
from gateway.webhooks.sending import Sender

CLOSED = Policy(frozenset(), allow_http=False)
LOOPBACK = Policy(frozenset({"127.0.0.1"}), allow_http=True)
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.mark.parametrize("url, says", [
    ("http://93.184.216.34/", "https"), ("ftp://93.184.216.34/", "https://"), ("https:///path", "absolute"),
    ("https://u:p@93.184.216.34/", "user name"), ("https://93.184.216.34/#x", "fragment"),
    ("https://127.0.0.1/", "127.0.0.1"), ("https://10.0.0.1/", "10.0.0.1"), ("https://192.168.1.1/", "192.168.1.1"),
    ("https://169.254.169.254/", "169.254.169.254"), ("https://[::1]/", "::1"), ("https://[fe80::1]/", "fe80::1"),
    ("https://100.64.0.1/", "100.64.0.1"), ("https://0.0.0.0/", "0.0.0.0"),
    ("https://[::ffff:127.0.0.1]/", "not a public address"),
    ("https://[fd00:ec2::254]/", "fd00:ec2::254"), ("https://224.0.0.1/", "224.0.0.1"),
    ("https://a b.example/", "not valid"), ("https://93.184.216.34:70000/", "not valid"),
    ("https://" + "a" * 2050, "2048"),
])
def test_urls_refused_before_anything_is_sent(url, says):
    with pytest.raises(DestinationRefused, match=None) as refused:
        destinations.check_url(url, CLOSED)
    assert says in str(refused.value)


def test_allowed_hosts_and_plain_http_are_the_operators_to_open():
    assert destinations.check_url("HTTPS://93.184.216.34/Hook", CLOSED) == "https://93.184.216.34/Hook"
    assert destinations.check_url("http://127.0.0.1:8080/h", LOOPBACK) == "http://127.0.0.1:8080/h"
    opened = Policy.from_config(type("C", (), {"allowed_hosts": ["Hooks.Internal."], "allow_http": False})())
    assert opened.allows("hooks.internal")


@pytest.mark.parametrize("host", ["localhost", "127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1"])
async def test_names_resolving_inside_are_refused_after_dns(host):
    with pytest.raises(DestinationRefused, match="not a public address"):
        await destinations.resolve(host, 443, CLOSED)


async def test_allowed_names_resolve_anywhere_and_bad_names_are_refused():
    assert "127.0.0.1" in await destinations.resolve("localhost", 443, Policy(frozenset({"localhost"}), False))
    for bad in ("a" * 300, "x..y", "no-such-host.invalid"):
        with pytest.raises(DestinationRefused):
            await destinations.resolve(bad, 443, CLOSED)


@given(st.ip_addresses())
def test_public_is_global_and_never_inside(address):
    inner = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped else address
    if destinations.public(address):
        assert inner.is_global and not inner.is_private and not inner.is_loopback and not inner.is_link_local
        assert not inner.is_multicast and inner not in ipaddress.ip_network("100.64.0.0/10")


def test_signatures_are_the_standard_webhooks_ones():
    # The Standard Webhooks reference vector (standard-webhooks/standard-webhooks, libraries' tests).
    body = b'{"test": 2432232314}'
    assert signing.signature(SECRET, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body) == \
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    headers = signing.headers(SECRET, "msg_1", 1000, body)
    assert signing.verify(SECRET, headers, body, now=1100)
    assert not signing.verify(SECRET, headers, body + b" ", now=1100)
    assert not signing.verify(SECRET, {**headers, "webhook-id": "msg_2"}, body, now=1100)
    assert not signing.verify(SECRET, headers, body, now=1000 + 301)  # too old: replayed
    assert not signing.verify(signing.new_secret(), headers, body, now=1100)
    with pytest.raises(ValueError, match="base64"):
        signing.secret_bytes("whsec_not base64!")
    assert len(signing.secret_bytes(signing.new_secret())) == 32


def test_backoff_doubles_with_jitter_to_an_hour_and_gives_up_in_time():
    for attempt in range(1, 20):
        full = min(3600.0, 5.0 * 2 ** (attempt - 1))
        assert backoff.retry_delay_s(attempt, lambda: 0.0) == full / 2
        assert backoff.retry_delay_s(attempt, lambda: 0.999999) == pytest.approx(full, rel=1e-5)
    assert backoff.retry_delay_s(1, lambda: 0.0, first_s=0.2) == 0.1
    assert not backoff.gives_up(0, 86_399_999_999, 86_400) and backoff.gives_up(0, 86_400_000_000, 86_400)


class Receiving:
    """A receiver that answers as a test tells it, and counts what reached it."""

    def __init__(self, answer) -> None:
        self.answer, self.hits, self.headers, self.bodies = answer, 0, [], []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.hits += 1
        self.headers.append(dict(request.headers))
        self.bodies.append(await request.read())
        return await self.answer(request)


@pytest.fixture
def receiving(aiohttp_server):
    async def start(answer, path: str = "/hook") -> tuple[Receiving, str]:
        receiving = Receiving(answer)
        app = web.Application()
        app.router.add_route("*", path, receiving.handle)
        app.router.add_route("*", "/elsewhere", receiving.handle)
        server = await aiohttp_server(app)
        return receiving, f"http://127.0.0.1:{server.port}{path}"
    return start


@pytest.fixture
async def sender():
    running = Sender(LOOPBACK, timeout_s=1.0, max_response_bytes=1024)
    yield running
    await running.close()


async def test_a_delivery_is_signed_and_its_answer_said(receiving, sender):
    async def ok(request):
        return web.Response(status=204)
    got, url = await receiving(ok)
    delivery = await sender.send(url, SECRET, "msg_1", b'{"a": 1}', int(time.time()))
    assert (delivery.status, delivery.ok, delivery.error) == (204, True, "")
    key = base64.b64decode(SECRET[6:])
    sent = got.headers[0]
    expected = base64.b64encode(hmac.new(key, f"msg_1.{sent['webhook-timestamp']}.".encode() + b'{"a": 1}',
                                         hashlib.sha256).digest()).decode()
    assert sent["webhook-signature"] == "v1," + expected and sent["Content-Type"] == "application/json"


async def test_failures_redirects_and_slow_or_endless_answers(receiving, sender):
    async def fail(request):
        return web.Response(status=500, text="no")

    async def redirect(request):
        raise web.HTTPFound("/elsewhere")

    async def slow(request):
        await asyncio.sleep(5)
        return web.Response(status=200)

    async def endless(request):
        answer = web.StreamResponse(status=200)
        await answer.prepare(request)
        while True:
            await answer.write(b"x" * 65536)

    got, url = await receiving(fail)
    assert (await sender.send(url, SECRET, "m", b"{}", 0)).status == 500
    got, url = await receiving(redirect)
    redirected = await sender.send(url, SECRET, "m", b"{}", 0)
    assert not redirected.ok and "redirects are not followed" in redirected.error and got.hits == 1
    for answer in (slow, endless):
        got, url = await receiving(answer)
        started = time.monotonic()
        delivery = await sender.send(url, SECRET, "m", b"{}", 0)
        assert time.monotonic() - started < 3
        assert answer is endless or (delivery.status, delivery.error) == (0, "timed out after 1 s")


async def test_refused_and_unreachable_destinations_reach_nothing(receiving, unused_tcp_port, monkeypatch):
    async def ok(request):
        return web.Response(status=200)
    got, url = await receiving(ok)
    closed = Sender(Policy(frozenset(), allow_http=True), timeout_s=1.0)
    try:
        refused = await closed.send(url, SECRET, "m", b"{}", 0)  # 127.0.0.1, not allowed here
        named = await closed.send(url.replace("127.0.0.1", "localhost"), SECRET, "m", b"{}", 0)
    finally:
        await closed.close()
    assert refused.status == named.status == 0 and "refused" in refused.error and "refused" in named.error
    assert got.hits == 0
    monkeypatch.setenv("HTTP_PROXY", url)  # a proxy in the environment is never used
    monkeypatch.setenv("http_proxy", url)
    direct = Sender(LOOPBACK, timeout_s=1.0)
    try:
        down = await direct.send(f"http://127.0.0.1:{unused_tcp_port}/hook", SECRET, "m", b"{}", 0)
    finally:
        await direct.close()
    assert down.status == 0 and "connection" in down.error and got.hits == 0
