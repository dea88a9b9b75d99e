"""Helpers shared by test modules (import as `from support import ...`; tests/ is on sys.path)."""

import json
import os
import socket
from decimal import Decimal

import aiohttp
import pytest

PROVIDER_KEY = "sk-sim-provider-secret-0123456789"
IN_CI = os.environ.get("CI", "").lower() == "true"


def need_service(host: str, port: int, name: str) -> None:
    """Skip (locally) or fail (in CI) when a service the test needs is not listening."""
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError as exc:
        message = f"{name} is not reachable at {host}:{port}: {exc}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


def decimal_json(body: bytes) -> dict:
    """Parse JSON keeping every number exact (money must never pass through a float)."""
    return json.loads(body, parse_float=Decimal)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def chat_body(text: str = "hello there", **extra) -> dict:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}], **extra}


async def sse_lines(response: aiohttp.ClientResponse) -> list[bytes]:
    return [line.removeprefix(b"data: ") async for line in response.content
            if line.startswith(b"data: ") for line in [line.rstrip(b"\n")]]
