"""Helpers of the Bedrock simulator tests (no tests here): AWS's own botocore client pointed at
the simulator, run in a thread since botocore blocks."""

import asyncio
from collections.abc import Callable
from typing import Any

import botocore.session
from botocore.config import Config

from simulator import cloud_credentials as creds

SONNET = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
BEARER = {"Authorization": f"Bearer {creds.BEDROCK_API_KEY}"}
WEATHER = {"toolSpec": {"name": "get_weather", "description": "Weather of a city", "inputSchema": {"json": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}}


def sim_url(client) -> str:
    """The base URL of the simulator behind an aiohttp test client."""
    return str(client.make_url("")).rstrip("/")


def bedrock(url: str, *, region: str = "us-east-1", key: str = creds.AWS_ACCESS_KEY_ID,
            secret: str = creds.AWS_SECRET_ACCESS_KEY, token: str | None = creds.AWS_SESSION_TOKEN) -> Any:
    """A botocore bedrock-runtime client signing with SigV4; no retries, so an error is seen once."""
    return botocore.session.get_session().create_client(
        "bedrock-runtime", region_name=region, endpoint_url=url, aws_access_key_id=key,
        aws_secret_access_key=secret, aws_session_token=token,
        config=Config(retries={"total_max_attempts": 1}, read_timeout=10, connect_timeout=5))


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"text": text}]}]


async def call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)` in a thread, so the simulator's event loop keeps serving."""
    return await asyncio.to_thread(function, *args, **kwargs)


async def stream_events(client: Any, **request: Any) -> list[dict[str, Any]]:
    """Every event botocore decodes from a ConverseStream answer, in order."""
    def run() -> list[dict[str, Any]]:
        return list(client.converse_stream(**request)["stream"])
    return await call(run)


async def auth_log(client) -> list[dict[str, Any]]:
    """The simulator's record of how each Bedrock request authenticated."""
    return (await (await client.get("/_sim/bedrock/requests")).json())["data"]
