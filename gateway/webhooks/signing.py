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
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def secret_bytes(secret: str) -> bytes:
    """The HMAC key: the base64 after `whsec_`; ValueError if it is not that."""
    if not secret.startswith(PREFIX):
        raise ValueError("a webhook secret starts with whsec_")
    try:
        return base64.b64decode(secret[len(PREFIX):], validate=True)
    except ValueError:
        raise ValueError("a webhook secret is whsec_ and base64") from None


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(secret_bytes(secret), signed, hashlib.sha256).digest()).decode()


def headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {"webhook-id": message_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": signature(secret, message_id, timestamp, body),
            "content-type": "application/json", "user-agent": USER_AGENT}


def verify(secret: str, received: Mapping[str, str], body: bytes, now: int, tolerance_s: int = 300) -> bool:
    """What a receiver does: the timestamp within `tolerance_s` of now, and any v1 signature right."""
    try:
        message_id, timestamp = received["webhook-id"], int(received["webhook-timestamp"])
        expected = signature(secret, message_id, timestamp, body).removeprefix("v1,")
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > tolerance_s:
        return False
    offered = [s[3:] for s in received.get("webhook-signature", "").split() if s.startswith("v1,")]
    return any(hmac.compare_digest(expected, s) for s in offered)
