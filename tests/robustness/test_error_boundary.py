"""The catch-all error boundary of gateway.edge.middleware: whatever escapes a handler is answered
with the documented JSON body (500, server_error, the request id) and logged once with its
traceback; control flow (cancellation, redirects) still passes through.

Every product route handles its bad input itself (tests/robustness/test_bad_input.py), so these
tests mount the real middleware in front of handlers that fail on purpose.
"""

import asyncio

import aiohttp
import pytest
import structlog
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.edge.connections import GuardedAppRunner, Timeouts
from gateway.ops.metrics import Metrics
from gateway.edge.middleware import add_request_id, observe
from gateway.edge.state import METRICS

SECRET = "opkey-operator-secret-1234"


async def fails(_request: web.Request) -> web.Response:
    raise RuntimeError(f"upstream said {SECRET}")


async def fails_mid_stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse()
    await response.prepare(request)
    await response.write(b"data: first\n\n")
    raise KeyError(SECRET)


async def cancelled(_request: web.Request) -> web.Response:
    raise asyncio.CancelledError()


async def redirects(_request: web.Request) -> web.Response:
    raise web.HTTPFound("/elsewhere")


@pytest.fixture
async def client(aiohttp_client):
    app = web.Application(middlewares=[observe])
    app[METRICS] = Metrics(30)
    app.on_response_prepare.append(add_request_id)
    for path, handler in (("/fails", fails), ("/stream", fails_mid_stream), ("/cancelled", cancelled),
                          ("/redirects", redirects)):
        app.router.add_get(path, handler)
    return await aiohttp_client(app)


def unhandled(logs: list[dict]) -> list[dict]:
    return [line for line in logs if line["event"] == "unhandled_error"]


async def test_an_unexpected_exception_is_the_json_500_naming_the_request_id(client):
    with structlog.testing.capture_logs() as logs:
        response = await client.get("/fails")
        text = await response.text()
    assert response.status == 500 and response.content_type == "application/json"
    error = (await response.json())["error"]
    assert error["type"] == "server_error" and error["code"] == "server_error"
    assert response.headers["X-Request-Id"] in error["message"]
    assert SECRET not in text and "RuntimeError" not in text
    (line,) = unhandled(logs)  # logged once, with the traceback
    assert line["log_level"] == "error" and line["exc_info"] is True
    assert line["route"] == "/fails"


async def test_a_failure_after_the_response_began_cuts_the_connection(client):
    with structlog.testing.capture_logs() as logs:
        response = await client.get("/stream")
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()  # never a complete-looking answer
    assert len(unhandled(logs)) == 1


async def test_cancellation_propagates_and_is_not_logged_as_a_failure(client):
    with structlog.testing.capture_logs() as logs, pytest.raises(aiohttp.ServerDisconnectedError):
        await client.get("/cancelled")
    assert unhandled(logs) == []


async def test_redirects_pass_through(client):
    response = await client.get("/redirects", allow_redirects=False)
    assert response.status == 302 and response.headers["Location"] == "/elsewhere"


# -- failures past the middlewares, answered by the connection itself ---------------------------

class BrokenMetrics(Metrics):
    def observe_request(self, *args, **kwargs) -> None:
        raise RuntimeError(f"metrics said {SECRET}")  # in observe's finally: past every middleware


class GuardedTestServer(TestServer):
    """The gateway's own connection handler (gateway.edge.connections), as `gateway serve` runs it."""

    async def _make_runner(self, **kwargs) -> web.AppRunner:
        return GuardedAppRunner(self.app, timeouts=Timeouts(header_s=5, body_s=5), **kwargs)


async def ok(_request: web.Request) -> web.Response:
    return web.json_response({})


async def test_a_failure_past_the_middlewares_is_the_json_500_logged_with_its_traceback(aiohttp_client):
    app = web.Application(middlewares=[observe])
    app[METRICS] = BrokenMetrics(30)
    app.on_response_prepare.append(add_request_id)
    app.router.add_get("/ok", ok)
    client = await aiohttp_client(GuardedTestServer(app))
    with structlog.testing.capture_logs() as logs:
        response = await client.get("/ok")
        text = await response.text()
    assert response.status == 500 and response.content_type == "application/json"
    error = (await response.json())["error"]
    assert error["type"] == "server_error" and response.headers["X-Request-Id"] in error["message"]
    assert SECRET not in text and "RuntimeError" not in text
    (line,) = unhandled(logs)
    assert line["log_level"] == "error" and isinstance(line["exc_info"], RuntimeError)
    assert line["request_id"] == response.headers["X-Request-Id"] and line["route"] == "/ok"
    assert not [line for line in logs if line["event"] == "request_unreadable"]
