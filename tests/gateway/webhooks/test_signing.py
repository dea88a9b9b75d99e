"""gateway.webhooks.signing: what the Standard Webhooks spec signs, checked against its published
vector, and what a receiver's verify accepts and refuses."""

import base64
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.webhooks import signing

# The vector of the Standard Webhooks reference libraries' tests (standard-webhooks/standard-webhooks).
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY = "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
NOW = 1_700_000_000


def test_the_published_vector_is_signed_and_verified_exactly():
    assert signing.signature(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE
    sent = {"webhook-id": VECTOR_ID, "webhook-timestamp": str(VECTOR_TIMESTAMP), "webhook-signature": VECTOR_SIGNATURE}
    assert signing.verify(VECTOR_SECRET, sent, VECTOR_BODY, now=VECTOR_TIMESTAMP)


def test_headers_carry_the_id_the_timestamp_the_signature_and_the_type():
    sent = signing.headers(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY)
    assert sent == {"webhook-id": VECTOR_ID, "webhook-timestamp": "1614265330", "webhook-signature": VECTOR_SIGNATURE,
                    "content-type": "application/json", "user-agent": "ai-gateway-webhooks/1"}


def test_new_secrets_are_whsec_and_base64_of_enough_random_bytes():
    made = {signing.new_secret() for _ in range(20)}
    assert len(made) == 20
    for secret in made:
        assert re.fullmatch(r"whsec_[A-Za-z0-9+/]+={0,2}", secret)
        assert 24 <= len(signing.secret_bytes(secret)) <= 32


@given(st.text(min_size=1, max_size=60), st.integers(min_value=0, max_value=2**40), st.binary(max_size=500))
def test_what_is_signed_verifies_and_nothing_else_does(message_id, timestamp, body):
    secret = signing.new_secret()
    sent = signing.headers(secret, message_id, timestamp, body)
    assert signing.verify(secret, sent, body, now=timestamp)
    assert not signing.verify(secret, sent, body + b"\n", now=timestamp)
    assert not signing.verify(signing.new_secret(), sent, body, now=timestamp)


@pytest.mark.parametrize("tamper", [
    {"webhook-id": "msg_other"}, {"webhook-timestamp": str(NOW + 1)},
    {"webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}, {"webhook-signature": ""},
    {"webhook-signature": "v1,bm9wZQ== v2,whatever"}, {"webhook-signature": "v1,é"}, {"webhook-timestamp": "1e9"},
    {"webhook-timestamp": " 1700000000"}, {"webhook-timestamp": ""},
])
def test_a_tampered_delivery_is_refused(tamper):
    body = b'{"type": "balance.low"}'
    sent = signing.headers(VECTOR_SECRET, "msg_1", NOW, body)
    assert signing.verify(VECTOR_SECRET, sent, body, now=NOW)
    assert not signing.verify(VECTOR_SECRET, {**sent, **tamper}, body, now=NOW)
    assert not signing.verify(VECTOR_SECRET, sent, b'{"type": "balance.lov"}', now=NOW)


def test_any_v1_signature_of_several_may_match_and_header_names_are_any_case():
    body = b"{}"
    good = signing.signature(VECTOR_SECRET, "msg_1", NOW, body)
    sent = {"Webhook-Id": "msg_1", "WEBHOOK-TIMESTAMP": str(NOW), "Webhook-Signature": f"v1,bm9wZQ== v2,x {good}"}
    assert signing.verify(VECTOR_SECRET, sent, body, now=NOW)


@pytest.mark.parametrize("now, fresh", [(NOW, True), (NOW + 300, True), (NOW - 300, True),
                                        (NOW + 301, False), (NOW - 301, False), (NOW + 86_400, False)])
def test_a_timestamp_off_by_more_than_the_tolerance_is_refused(now, fresh):
    sent = signing.headers(VECTOR_SECRET, "msg_1", NOW, b"{}")
    assert signing.verify(VECTOR_SECRET, sent, b"{}", now=now) is fresh
    assert signing.verify(VECTOR_SECRET, sent, b"{}", now=NOW + 1000, tolerance_s=1000)


@pytest.mark.parametrize("secret", ["", "whsec_", "whsec_not base64!", "whsec_abc", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                                    "sk_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"])
def test_a_malformed_secret_is_a_value_error_and_verifies_nothing(secret):
    with pytest.raises(ValueError, match="whsec_"):
        signing.secret_bytes(secret)
    with pytest.raises(ValueError, match="whsec_"):
        signing.headers(secret, "msg_1", NOW, b"{}")
    sent = signing.headers(VECTOR_SECRET, "msg_1", NOW, b"{}")
    assert not signing.verify(secret, sent, b"{}", now=NOW)


def test_the_key_is_the_decoded_base64():
    assert signing.secret_bytes("whsec_" + base64.b64encode(b"k" * 24).decode()) == b"k" * 24
