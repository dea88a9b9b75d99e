"""Where webhooks may go (no SSRF into the operator's network): HTTPS unless plain HTTP is
allowed, and only to public addresses, checked after DNS resolution, unless the operator allows
the host. The sender connects to exactly the addresses checked here (gateway.webhooks.sending),
so a name that resolves differently the next time (DNS rebinding) gains nothing."""

import asyncio
import ipaddress
import socket
from typing import NamedTuple

from yarl import URL

from gateway.config import WebhooksConfig

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
MAX_URL = 2048
SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: not global, yet not "private" to Python


class DestinationRefused(Exception):
    """A destination a webhook may not go to; the message says why and may be shown to the org."""


class Policy(NamedTuple):
    allowed_hosts: frozenset[str]
    allow_http: bool

    @classmethod
    def from_config(cls, config: WebhooksConfig) -> "Policy":
        hosts = config.allowed_hosts if isinstance(config.allowed_hosts, list) else [config.allowed_hosts]
        return cls(frozenset(_host(h) for h in hosts if h), config.allow_http)

    def allows(self, host: str) -> bool:
        return _host(host) in self.allowed_hosts


def _host(host: str) -> str:
    return host.strip().strip("[]").lower().rstrip(".")


def public(address: Address) -> bool:
    """Whether an address is on the public internet (an IPv4 one inside IPv6 judged as itself)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
        if embedded is not None:
            return public(embedded)
        if address in ipaddress.ip_network("64:ff9b::/96"):  # NAT64: the IPv4 address in its last 32 bits
            return public(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return address.is_global and not address.is_multicast and address not in SHARED


def check_url(url: str, policy: Policy) -> str:
    """The URL normalised, or DestinationRefused saying what is wrong with it."""
    if len(url) > MAX_URL:
        raise DestinationRefused(f"the url is longer than {MAX_URL} characters")
    try:  # yarl refuses what no URL may hold (a space in a host, a port out of range) with ValueError
        parsed = URL(url.strip())
        _check_parts(parsed, parsed.port, policy)
        normal = str(parsed.with_scheme(parsed.scheme.lower()).with_host((parsed.raw_host or "").lower()))
    except ValueError as exc:
        raise DestinationRefused(f"the url is not valid: {exc}") from None
    literal = _literal(parsed.raw_host or "")
    if literal is not None and not public(literal) and not policy.allows(parsed.raw_host or ""):
        raise DestinationRefused(f"{literal} is not a public address (private, loopback, link-local or reserved)")
    return normal


def _check_parts(parsed: URL, port: int | None, policy: Policy) -> None:
    if not parsed.is_absolute() or parsed.scheme.lower() not in ("http", "https"):
        raise DestinationRefused("the url must be an absolute https:// url")
    if parsed.scheme.lower() == "http" and not policy.allow_http:
        raise DestinationRefused("the url must use https (plain http is not allowed on this gateway)")
    if not parsed.raw_host:
        raise DestinationRefused("the url names no host")
    if parsed.raw_user or parsed.raw_password:
        raise DestinationRefused("the url may not carry a user name or password")
    if parsed.raw_fragment:
        raise DestinationRefused("the url may not have a #fragment")
    if port is not None and not 0 < port < 65536:
        raise DestinationRefused(f"port {port} is out of range")


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


async def resolve(host: str, port: int, policy: Policy) -> list[str]:
    """The addresses `host` resolves to, each public unless the host is allowed; else refused."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise DestinationRefused(f"{host} does not resolve: {exc.strerror or exc}") from None
    except UnicodeError:  # a name IDNA cannot encode (an empty or overlong label)
        raise DestinationRefused(f"{host[:100]} is not a valid host name") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if policy.allows(host):
        return addresses
    for text in addresses:
        if not public(ipaddress.ip_address(text.split("%")[0])):
            raise DestinationRefused(f"{host} resolves to {text}, which is not a public address"
                                     " (private, loopback, link-local or reserved)")
    return addresses
