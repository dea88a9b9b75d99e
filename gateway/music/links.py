"""Short-lived signed download paths: HMAC-SHA256 over the object key and the expiry.

The path carries no key of the caller's, so an <audio> element can play it, and it stops
working at its expiry or as soon as the object is swept.
"""

import hashlib
import hmac
import secrets
import time
from urllib.parse import quote

from gateway.edge.parsing import MAX_WHOLE, is_whole, printable

MEDIA_PREFIX = "/media/"


class Signer:
    def __init__(self, secret: str, ttl_s: int) -> None:
        # Without a configured secret each process signs with its own: links then only work on
        # the replica that made them, so production configs set storage.signing_secret.
        self._key = (secret or secrets.token_hex(32)).encode()
        self.ttl_s = ttl_s

    def _signature(self, object_key: str, expires: int) -> str:
        return hmac.new(self._key, f"{object_key}\n{expires}".encode(), hashlib.sha256).hexdigest()

    def path(self, object_key: str, now: float | None = None) -> str:
        """A download path for `object_key`, valid for ttl_s seconds."""
        return self.link(object_key, now)[0]

    def link(self, object_key: str, now: float | None = None) -> tuple[str, int]:
        """A download path for `object_key` and the Unix time it stops working."""
        expires = int((now or time.time()) + self.ttl_s)
        signature = self._signature(object_key, expires)
        return f"{MEDIA_PREFIX}{quote(object_key)}?expires={expires}&signature={signature}", expires

    def check(self, object_key: str, expires: str, signature: str, now: float | None = None) -> bool:
        """True only for an untampered signature that has not expired."""
        # ASCII digits within bounds ("²" is a digit to str.isdigit); compare_digest refuses non-ASCII.
        if not (is_whole(expires, 0, MAX_WHOLE) and printable(signature)) or int(expires) < (now or time.time()):
            return False
        return hmac.compare_digest(self._signature(object_key, int(expires)), signature)
