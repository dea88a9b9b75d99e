"""POST /v1/messages/count_tokens: Anthropic's own count for its models, recorded at zero cost;
a 400 for other models, never a guessed number."""

import pytest

from tests.support import auth, request_events, upstream_requests

anthropic = pytest.importorskip("anthropic")

CLAUDE, CLAUDE_UPSTREAM = "claude-haiku-4-5", "claude-haiku-4-5-20251001"
ROUTE = "/v1/messages/count_tokens"


pytestmark = pytest.mark.usefixtures("no_anthropic_env")


@pytest.fixture
def sdk(gateway, org):
    return anthropic.AsyncAnthropic(base_url=gateway.url, api_key=org["api_key"], max_retries=0)


async def test_sdk_counts_through_the_provider_and_nothing_is_charged(sdk, gateway, org, simulator):
    counted = await sdk.messages.count_tokens(model=CLAUDE, system="Be brief.",
                                              messages=[{"role": "user", "content": "one two three"}])
    assert counted.input_tokens == (2 + 4) + (3 + 4)  # the simulator's rule: words plus 4 a message
    (sent,) = await upstream_requests(gateway, simulator)
    assert (sent["path"], sent["body"]["model"]) == (ROUTE, CLAUDE_UPSTREAM)
    assert "max_tokens" not in sent["body"]
    (event,) = await request_events(gateway)
    assert (event.route, event.model, event.status, event.charged_inr_nano, event.cost_inr_nano) == \
        (ROUTE, CLAUDE, 200, 0, 0)
    assert event.content_id == ""  # no text kept for a count
    assert await gateway.balance(org["org_id"]) == 100


async def test_an_alias_and_the_provider_form_count_too(gateway, org):
    for model in ("claude-haiku-4-5-20251001", "anthropic/claude-haiku-4-5"):
        body = {"model": model, "messages": [{"role": "user", "content": "a"}]}
        response = await gateway.client.post(ROUTE, json=body, headers=auth(org["api_key"]))
        assert response.status == 200 and await response.json() == {"input_tokens": 5}


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gemini-2.5-flash"])
async def test_other_models_are_400_saying_counting_is_not_available(sdk, gateway, simulator, model):
    with pytest.raises(anthropic.BadRequestError) as caught:
        await sdk.messages.count_tokens(model=model, messages=[{"role": "user", "content": "hi"}])
    error = caught.value.body["error"]
    assert "counting tokens is not available" in error["message"] and model in error["message"]
    assert error["param"] == "model"
    assert await upstream_requests(gateway, simulator) == []


@pytest.mark.parametrize(("body", "param"), [
    ({"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}, "model"),
    ({"model": "tune-3-clip-preview", "messages": [{"role": "user", "content": "hi"}]}, "model"),
    ({"model": CLAUDE, "messages": []}, "messages"),
    ({"model": CLAUDE}, "messages"),
])
async def test_invalid_requests_are_400_in_anthropics_shape(gateway, org, simulator, body, param):
    response = await gateway.client.post(ROUTE, json=body, headers=auth(org["api_key"]))
    assert response.status == 400
    answer = await response.json()
    assert answer["type"] == "error" and answer["error"]["param"] == param
    assert await upstream_requests(gateway, simulator) == []


async def test_an_upstream_failure_is_a_gateway_error_recorded_and_not_charged(sdk, gateway, org):
    with pytest.raises(anthropic.RateLimitError) as caught:
        await sdk.messages.count_tokens(model=CLAUDE, messages=[{"role": "user", "content": "x [sim:status=429]"}])
    assert caught.value.body["error"]["code"] == "gateway_error"
    (event,) = await request_events(gateway)
    assert (event.route, event.status, event.charged_inr_nano) == (ROUTE, 429, 0)


async def test_x_api_key_is_accepted_and_a_missing_key_is_401(gateway, org):
    body = {"model": CLAUDE, "messages": [{"role": "user", "content": "hi"}]}
    response = await gateway.client.post(ROUTE, json=body, headers={"x-api-key": org["api_key"]})
    assert response.status == 200
    response = await gateway.client.post(ROUTE, json=body)
    assert response.status == 401


async def test_no_credit_is_402_without_an_upstream_call(gateway, simulator):
    broke = await gateway.new_org("0")
    response = await gateway.client.post(ROUTE, json={"model": CLAUDE, "messages": [{"role": "user", "content": "x"}]},
                                         headers=auth(broke["api_key"]))
    assert response.status == 402
    assert await upstream_requests(gateway, simulator) == []
