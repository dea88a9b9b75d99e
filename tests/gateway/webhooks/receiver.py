"""A real webhook receiver for tests: an HTTP server on 127.0.0.1 that checks every delivery's
Standard Webhooks signature on its own (hmac and base64, none of the gateway's code), keeps what it
got in arrival order, and answers as a test tells it: fail the next N, or hold each answer a while."""

import asyncio
import base64
import hashlib
import hmac
import json
import time
from typing import Any

from aiohttp import web
import contextlib

TOLERANCE_S = 300


def signed_correctly(secret: str, headers: Any, body: bytes) -> bool:
    """What a receiver following the Standard Webhooks spec checks."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    message_id, timestamp = headers["webhook-id"], headers["webhook-timestamp"]
    expected = base64.b64encode(hmac.new(key, f"{message_id}.{timestamp}.".encode() + body,
                                         hashlib.sha256).digest()).decode()
    fresh = abs(time.time() - int(timestamp)) <= TOLERANCE_S
    offered = [s.split(",", 1)[1] for s in headers["webhook-signature"].split() if s.startswith("v1,")]
    return fresh and any(hmac.compare_digest(expected, s) for s in offered)


class Receiver:
    def __init__(self) -> None:
        self.secret = ""  # set once the endpoint is created
        self.got: list[dict] = []  # every delivery: its id, body, and whether its signature held
        self.fail_next = 0
        self.hold_s = 0.0
        self.arrived = asyncio.Event()
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/hook"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.got.append({"id": request.headers.get("webhook-id"), "body": json.loads(body),
                         "signed": bool(self.secret) and signed_correctly(self.secret, request.headers, body),
                         "timestamp": request.headers.get("webhook-timestamp")})
        self.arrived.set()
        if self.fail_next > 0:
            self.fail_next -= 1
            return web.Response(status=503, text="not now")
        await asyncio.sleep(self.hold_s)
        return web.Response(status=204)

    def ids(self) -> list[str]:
        """Each message id once, in the order it first arrived."""
        return list(dict.fromkeys(str(got["id"]) for got in self.got))

    def of_type(self, kind: str) -> list[dict]:
        return [got["body"] for got in self.got if got["body"]["type"] == kind]

    async def until(self, accept, timeout: float = 15.0) -> None:
        """Wait until `accept(self)` holds."""
        deadline = time.monotonic() + timeout
        while not accept(self):
            if time.monotonic() > deadline:
                raise AssertionError(f"the receiver never got what was awaited; it got {self.got}")
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), 0.2)
