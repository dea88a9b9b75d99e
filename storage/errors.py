"""The one exception storage raises, and the translation of S3 client failures into it."""

import asyncio

import aiohttp
from botocore.exceptions import BotoCoreError, ClientError

# Everything an S3 call through aiobotocore can fail with: errors S3 answered with
# (ClientError), errors on our side of the wire (BotoCoreError: connection, timeouts,
# short reads), and transport errors aiohttp raises while a body is being read.
S3_FAILURES = (ClientError, BotoCoreError, aiohttp.ClientError, asyncio.TimeoutError)


class StorageError(Exception):
    """An S3 operation failed; the message says which and why (never a credential)."""


def error_code(exc: BaseException) -> str:
    """S3's error code for a ClientError ("NoSuchKey", "404", ...); "" for other failures."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def reason(exc: BaseException) -> str:
    """A one-line reason for a failure: "Code: message" when S3 answered, else the error text.

    Built from S3's error code and message rather than str(exc), so no request detail beyond
    what S3 chose to say back ends up in logs.
    """
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = error.get("Code") or f"HTTP {status}"
        message = error.get("Message") or "no message"
        return f"{code}: {message}"
    return f"{type(exc).__name__}: {exc}"


def storage_error(action: str, exc: BaseException) -> StorageError:
    """A StorageError saying `action` (e.g. "GET s3://bucket/key") failed and why."""
    return StorageError(f"{action} failed: {reason(exc)}")
