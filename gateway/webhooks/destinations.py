"""Where webhooks may go (no SSRF into the operator's network): HTTPS unless plain HTTP is
allowed, and only to public addresses, checked after DNS resolution, unless the operator allows
the host. The sender connects to exactly the addresses checked here (gateway.webhooks.sending),
so a name that resolves differently the next time (DNS rebinding) gains nothing."""

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

from yarl import URL

from gateway.config import WebhooksConfig

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
MAX_URL = 2048
SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: not global, yet not "private" to Python
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix: an IPv4 address in the last 32 bits
# Local-use NAT64 (RFC 8215) translates to the operator's own IPv4 network, wherever it puts the
# address; Python before 3.13 calls it global. Site-local (fec0::/10, deprecated) is private in all
# but name, and Python's is_global says nothing of it.
INSIDE_V6 = (ipaddress.ip_network("64:ff9b:1::/48"), ipaddress.ip_network("fec0::/10"))


class DestinationRefused(ValueError):
    """A destination a webhook may not go to; the message says why and may be shown to the org."""


@dataclass(frozen=True)
class Policy:
    """Where the operator opened the guard: hosts that may resolve anywhere (each as `_host` spells
    it: from_config does that), and whether plain HTTP is allowed."""

    allowed_hosts: frozenset[str]
    allow_http: bool

    @classmethod
    def from_config(cls, config: WebhooksConfig) -> "Policy":
        hosts = config.allowed_hosts if isinstance(config.allowed_hosts, list) else [config.allowed_hosts]
        return cls(frozenset(_host(h) for h in hosts if h), config.allow_http)

    def allows(self, host: str) -> bool:
        return _host(host) in self.allowed_hosts


def _host(host: str) -> str:
    """A host as allowed_hosts holds it: lower case, no trailing dot, an address in its short form."""
    name = host.strip().strip("[]").lower().rstrip(".")
    literal = _literal(name)
    return name if literal is None else str(literal)


def public(address: Address) -> bool:
    """Whether an address is on the public internet: global unicast, none of private, loopback,
    link-local, site-local, reserved, multicast, unspecified or shared (100.64/10). An IPv4 address
    carried in IPv6 (mapped, 6to4, Teredo, NAT64) is judged as itself."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded(address)
        if embedded is not None:
            return public(embedded)
        if any(address in network for network in INSIDE_V6):
            return False
    # is_global alone changed between Python versions; the named properties hold in all of them.
    inside = (address.is_private or address.is_loopback or address.is_link_local or address.is_reserved
              or address.is_multicast or address.is_unspecified or address in SHARED)
    return address.is_global and not inside


def _embedded(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a packet to `address` ends up at, for the encodings that say which."""
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)


def check_url(url: str, policy: Policy) -> str:
    """The URL normalised, or DestinationRefused saying what is wrong with it."""
    if len(url) > MAX_URL:
        raise DestinationRefused(f"the url is longer than {MAX_URL} characters")
    try:  # yarl refuses what no URL may hold (a space in a host, a port out of range) with ValueError
        parsed = URL(url.strip())
        _check_parts(parsed, parsed.port, policy)
        normal = str(parsed.with_scheme(parsed.scheme.lower()).with_host((parsed.raw_host or "").lower()))
    except DestinationRefused:
        raise
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
