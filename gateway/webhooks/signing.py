"""Standard Webhooks signatures (https://www.standardwebhooks.com/): what the gateway sends with
each delivery, and what a receiver checks."""

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping

PREFIX = "whsec_"
SECRET_BYTES = 32
USER_AGENT = "ai-gateway-webhooks/1"


def new_secret() -> str:
    """A fresh secret: whsec_ and the base64 of 32 random bytes."""
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def secret_bytes(secret: str) -> bytes:
    """The HMAC key: the base64 after `whsec_`; ValueError if it is not that, or decodes to nothing."""
    if not secret.startswith(PREFIX):
        raise ValueError("a webhook secret starts with whsec_")
    try:
        key = base64.b64decode(secret[len(PREFIX):], validate=True)
    except ValueError:
        raise ValueError("a webhook secret is whsec_ and base64") from None
    if not key:  # an empty HMAC key would sign with nothing secret at all
        raise ValueError("a webhook secret is whsec_ and base64 of at least one byte")
    return key


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """`v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`; ValueError for a malformed secret."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(secret_bytes(secret), signed, hashlib.sha256).digest()).decode()


def headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The headers of a delivery of `body` (JSON), signed; `timestamp` in Unix seconds."""
    return {"webhook-id": message_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": signature(secret, message_id, timestamp, body),
            "content-type": "application/json", "user-agent": USER_AGENT}


def verify(secret: str, headers: Mapping[str, str], body: bytes, now: int, tolerance_s: int = 300) -> bool:
    """What a receiver does: the timestamp within `tolerance_s` of `now` (either way: a replay is
    old), and any of the space-separated v1 signatures right. False, never an error, for anything
    missing or malformed, the secret included. Header names in any case."""
    received = {name.lower(): value for name, value in headers.items()}
    message_id, stamp = received.get("webhook-id", ""), received.get("webhook-timestamp", "")
    if not (stamp.isascii() and stamp.isdigit()) or abs(now - int(stamp)) > tolerance_s:
        return False
    try:
        expected = signature(secret, message_id, int(stamp), body).encode()
    except ValueError:
        return False
    # Bytes, since compare_digest refuses a str that is not ASCII (a forged header may be anything).
    offered = [s.encode() for s in received.get("webhook-signature", "").split() if s.startswith("v1,")]
    return any(hmac.compare_digest(expected, s) for s in offered)
