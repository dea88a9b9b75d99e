"""gateway.webhooks.destinations: where a webhook may go. The URL is checked as it is registered
(and again at each send), its host's addresses after DNS; private, loopback, link-local, reserved
and shared addresses are refused unless the operator allowed the host."""

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.config import WebhooksConfig
from gateway.webhooks.destinations import DestinationRefused, Policy, check_url, public, resolve

CLOSED = Policy(frozenset(), allow_http=False)
SHARED = ipaddress.ip_network("100.64.0.0/10")


@pytest.mark.parametrize("url, says", [
    ("http://93.184.216.34/", "must use https (plain http is not allowed"), ("ftp://93.184.216.34/", "https://"),
    ("/hook", "absolute"), ("https:///hook", "absolute"), ("https://u:p@93.184.216.34/", "user name or password"),
    ("https://u@93.184.216.34/", "user name"), ("https://93.184.216.34/#top", "fragment"),
    ("https://93.184.216.34:0/", "port 0"), ("https://93.184.216.34:65536/", "not valid"),
    ("https://example.com/" + "a" * 2048, "2048"), ("https://a b.example/", "not valid"),
    ("https://127.0.0.1/", "127.0.0.1 is not a public address"), ("https://10.0.0.1/", "10.0.0.1"),
    ("https://192.168.1.1/", "192.168.1.1"), ("https://172.16.0.1/", "172.16.0.1"),
    ("https://169.254.169.254/latest/meta-data/", "169.254.169.254"), ("https://[::1]/", "::1"),
    ("https://[fe80::1]/", "fe80::1"), ("https://100.64.0.1/", "100.64.0.1"), ("https://0.0.0.0/", "0.0.0.0"),
    ("https://[::ffff:127.0.0.1]/", "not a public address"), ("https://[fd00:ec2::254]/", "fd00:ec2::254"),
    ("https://[::]/", "not a public address"), ("https://224.0.0.1/", "224.0.0.1"),
])
def test_urls_refused_at_registration_say_why(url, says):
    with pytest.raises(DestinationRefused) as refused:
        check_url(url, CLOSED)
    assert says in str(refused.value)
    assert isinstance(refused.value, ValueError)


def test_a_good_url_comes_back_normalised():
    assert check_url("HTTPS://Hooks.Example.COM/In/Path?Q=1", CLOSED) == "https://hooks.example.com/In/Path?Q=1"
    assert check_url("https://93.184.216.34:8443/h", CLOSED) == "https://93.184.216.34:8443/h"
    assert check_url("https://example.com/" + "a" * 2000, CLOSED).startswith("https://example.com/a")


def test_the_operator_opens_hosts_and_plain_http():
    opened = Policy.from_config(WebhooksConfig(allowed_hosts="Hooks.Internal., 127.0.0.1, [0:0::1]", allow_http=True))
    assert opened.allowed_hosts == frozenset({"hooks.internal", "127.0.0.1", "::1"})
    assert check_url("http://127.0.0.1:8080/h", opened) == "http://127.0.0.1:8080/h"
    assert check_url("https://[::1]/h", opened) == "https://[::1]/h"
    assert check_url("http://hooks.internal/h", opened) == "http://hooks.internal/h"
    with pytest.raises(DestinationRefused, match=r"10\.0\.0\.1"):
        check_url("http://10.0.0.1/", opened)  # allowing some hosts opens no others
    assert Policy.from_config(WebhooksConfig()) == CLOSED


@pytest.mark.parametrize("host", ["localhost", "127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1", "::1", "10.1.2.3"])
async def test_names_resolving_inside_are_refused_naming_host_and_address(host):
    with pytest.raises(DestinationRefused, match="is not a public address") as refused:
        await resolve(host, 443, CLOSED)
    assert str(refused.value).startswith(f"{host} resolves to ")


async def test_allowed_hosts_resolve_anywhere_and_public_literals_need_no_network():
    assert "127.0.0.1" in await resolve("LOCALHOST", 443, Policy(frozenset({"localhost"}), False))
    assert await resolve("127.0.0.1", 80, Policy(frozenset({"127.0.0.1"}), False)) == ["127.0.0.1"]
    assert await resolve("93.184.216.34", 443, CLOSED) == ["93.184.216.34"]
    assert await resolve("2606:4700:4700::1111", 443, CLOSED) == ["2606:4700:4700::1111"]


@pytest.mark.parametrize("host", ["no-such-host.invalid", "a" * 300, "x..y"])
async def test_names_that_do_not_resolve_are_refused(host):
    with pytest.raises(DestinationRefused):
        await resolve(host, 443, CLOSED)


@pytest.mark.parametrize("address, is_public", [
    ("1.1.1.1", True), ("93.184.216.34", True), ("2606:4700::1111", True),
    ("169.254.169.254", False), ("fd00:ec2::254", False), ("100.64.0.1", False), ("100.127.255.255", False),
    ("0.0.0.0", False), ("::", False), ("255.255.255.255", False), ("240.0.0.1", False), ("192.0.2.1", False),
    ("224.0.0.1", False), ("ff0e::1", False), ("fec0::1", False), ("::127.0.0.1", False), ("2001:db8::1", False),
    ("::ffff:10.0.0.1", False), ("::ffff:1.1.1.1", True),
    ("2002:7f00:1::", False), ("2002:101:101::", True),  # 6to4 of 127.0.0.1, of 1.1.1.1
    ("64:ff9b::a00:1", False), ("64:ff9b::101:101", True), ("64:ff9b:1::101:101", False),  # NAT64
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", False),  # Teredo to 127.0.0.1
])
def test_public_addresses(address, is_public):
    assert public(ipaddress.ip_address(address)) is is_public


@given(st.ip_addresses(v=4))
def test_an_ipv4_address_is_public_when_python_calls_it_global_and_not_multicast(address):
    assert public(address) is (address.is_global and not address.is_multicast and address not in SHARED)
    high, low = int(address) >> 16, int(address) & 0xFFFF
    embeddings = (f"::ffff:{address}", f"64:ff9b::{address}", f"2002:{high:x}:{low:x}::")
    for carried in embeddings:  # the same address carried in IPv6 is judged the same
        assert public(ipaddress.ip_address(carried)) is public(address)


@given(st.ip_addresses(v=6))
def test_a_public_ipv6_address_is_none_of_the_inside_kinds(address):
    if public(address) and not _carries_ipv4(address):
        assert address.is_global and not address.is_site_local
        assert not (address.is_private or address.is_loopback or address.is_link_local or address.is_reserved)
        assert not (address.is_multicast or address.is_unspecified)


def _carries_ipv4(address: ipaddress.IPv6Address) -> bool:
    carried = address.ipv4_mapped or address.sixtofour or address.teredo
    return carried is not None or address in ipaddress.ip_network("64:ff9b::/96")
