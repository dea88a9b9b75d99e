"""gateway.webhooks.sending against real receivers on 127.0.0.1: a delivery is signed as the spec
has it, its answer said in a few words, no redirect followed, the wait and the read bounded, and it
goes only where the policy allows, checked again as it connects; proxies in the environment unused."""

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from gateway.webhooks import signing
from gateway.webhooks.destinations import DestinationRefused, Policy
from gateway.webhooks.sending import CheckedResolver, Delivery, Sender

LOOPBACK = Policy(frozenset({"127.0.0.1"}), allow_http=True)
SECRET = signing.new_secret()
BODY = b'{"type": "balance.low", "data": {"balance_inr": "12.50"}}'
Answer = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Receiver:
    """Answers every path as a test tells it; keeps each request's headers, body and verdict."""

    def __init__(self, answer: Answer) -> None:
        self.answer, self.got = answer, []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        verified = signing.verify(SECRET, request.headers, body, now=int(time.time()))
        self.got.append({"path": request.path, "headers": request.headers, "body": body, "verified": verified})
        return await self.answer(request)


@pytest.fixture
def receiver(aiohttp_server):
    async def start(answer: Answer) -> tuple[Receiver, str]:
        receiving = Receiver(answer)
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", receiving.handle)
        server = await aiohttp_server(app)
        return receiving, f"http://127.0.0.1:{server.port}/hook"
    return start


@pytest.fixture
async def sender():
    running = Sender(LOOPBACK, timeout_s=1.0, max_response_bytes=4096)
    yield running
    await running.close()


async def send(sender: Sender, url: str) -> Delivery:
    return await sender.send(url, SECRET, "msg_2b1", BODY, int(time.time()))


async def send_once(url: str, timeout_s: float, max_response_bytes: int = 4096) -> tuple[Delivery, float]:
    """One delivery by a Sender of its own, and how many seconds it took."""
    sending = Sender(LOOPBACK, timeout_s=timeout_s, max_response_bytes=max_response_bytes)
    started = time.monotonic()
    try:
        return await send(sending, url), time.monotonic() - started
    finally:
        await sending.close()


async def answer_204(request: web.Request) -> web.Response:
    return web.Response(status=204)


async def test_a_delivery_verifies_at_the_receiver(receiver, sender):
    got, url = await receiver(answer_204)
    delivery = await send(sender, url)
    assert (delivery.status, delivery.error, delivery.ok) == (204, "", True) and delivery.latency_ms >= 0
    [request] = got.got
    assert request["verified"] and request["body"] == BODY
    assert request["headers"]["webhook-id"] == "msg_2b1" and request["headers"]["webhook-signature"].startswith("v1,")
    assert request["headers"]["content-type"] == "application/json"
    assert request["headers"]["user-agent"] == "ai-gateway-webhooks/1"


@pytest.mark.parametrize("status", [500, 404, 410, 429])
async def test_a_failing_answer_is_said_with_its_status(receiver, sender, status):
    async def fail(request):
        return web.Response(status=status, text="no")
    _, url = await receiver(fail)
    delivery = await send(sender, url)
    assert (delivery.status, delivery.ok) == (status, False) and str(status) in delivery.error


@pytest.mark.parametrize("redirect", [web.HTTPFound, web.HTTPTemporaryRedirect, web.HTTPPermanentRedirect])
async def test_a_redirect_is_not_followed(receiver, sender, redirect):
    async def moved(request):
        if request.path == "/hook":
            raise redirect("/moved")
        return web.Response(status=200)
    got, url = await receiver(moved)
    delivery = await send(sender, url)
    assert not delivery.ok and delivery.status == redirect.status_code
    assert "redirects are not followed" in delivery.error
    assert [request["path"] for request in got.got] == ["/hook"]  # the target was never asked


async def test_a_slow_receiver_times_out_within_the_timeout(receiver):
    async def slow(request):
        await asyncio.sleep(10)
        return web.Response(status=200)
    _, url = await receiver(slow)
    delivery, took_s = await send_once(url, timeout_s=0.5)
    assert 0.4 < took_s < 1.5
    assert delivery == Delivery(0, "timed out after 0.5 s", delivery.latency_ms)


async def test_an_endless_answer_is_cut_at_the_limit_without_waiting(receiver):

    async def endless(request):
        answer = web.StreamResponse(status=200)
        await answer.prepare(request)
        while True:  # until the sender hangs up
            await answer.write(b"x" * 65_536)
    _, url = await receiver(endless)
    delivery, took_s = await send_once(url, timeout_s=10.0, max_response_bytes=100_000)
    assert took_s < 2 and (delivery.status, delivery.error) == (200, "")


async def test_a_stalled_answer_body_leaves_the_status_standing(receiver):
    async def stalls(request):
        answer = web.StreamResponse(status=202)
        await answer.prepare(request)
        await answer.write(b'{"queued"')
        await asyncio.sleep(10)
        return answer
    _, url = await receiver(stalls)
    delivery, took_s = await send_once(url, timeout_s=0.5)
    assert took_s < 1.5 and (delivery.status, delivery.ok) == (202, True)


async def test_a_closed_port_is_connection_refused(sender, unused_tcp_port):
    delivery = await send(sender, f"http://127.0.0.1:{unused_tcp_port}/hook")
    assert (delivery.status, delivery.error) == (0, "connection refused")


async def test_destinations_the_policy_does_not_allow_are_refused_and_never_reached(receiver):
    got, url = await receiver(answer_204)
    port = url.split(":")[2].split("/")[0]
    closed = Sender(Policy(frozenset(), allow_http=True), timeout_s=1.0)
    https_only = Sender(Policy(frozenset({"127.0.0.1"}), allow_http=False), timeout_s=1.0)
    try:
        literal = await send(closed, url)  # checked again at send, whatever registration said
        named = await send(closed, f"http://localhost:{port}/hook")  # refused as it connects
        plain = await send(https_only, url)
    finally:
        await closed.close()
        await https_only.close()
    assert literal.status == named.status == plain.status == 0
    assert literal.error == "refused: 127.0.0.1 is not a public address (private, loopback, link-local or reserved)"
    assert named.error.startswith("refused: localhost resolves to ") and "not a public address" in named.error
    assert plain.error.startswith("refused: the url must use https")
    assert got.got == [] and SECRET not in literal.error + named.error + plain.error


async def test_an_allowed_name_is_connected_to_at_the_addresses_checked(receiver):
    got, url = await receiver(answer_204)
    port = int(url.split(":")[2].split("/")[0])
    policy = Policy(frozenset({"localhost"}), allow_http=True)
    named = Sender(policy, timeout_s=1.0)
    try:
        delivery = await send(named, f"http://localhost:{port}/hook")
    finally:
        await named.close()
    assert delivery.ok and got.got[0]["headers"]["host"] == f"localhost:{port}"
    resolved = await CheckedResolver(policy).resolve("localhost", port)
    assert "127.0.0.1" in {result["host"] for result in resolved}
    with pytest.raises(DestinationRefused, match="localhost resolves to"):
        await CheckedResolver(LOOPBACK).resolve("localhost", port)  # the connector asks this, each time


async def test_proxies_in_the_environment_are_not_used(receiver, sender, monkeypatch):
    proxy, proxy_url = await receiver(answer_204)
    got, url = await receiver(answer_204)
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, proxy_url.removesuffix("/hook"))
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    delivery = await send(sender, url)
    assert delivery.ok and len(got.got) == 1 and proxy.got == []
