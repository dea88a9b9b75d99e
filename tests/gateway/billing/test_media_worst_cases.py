"""Media through the real gateway and simulator (which bills images, audio and documents as each
provider does: simulator.media_billing): every answered request held at least its true cost, so
no anomaly is recorded or counted; and a key's budget refuses (402) an image request whose worst
case it cannot hold, admits one it can, and is never passed."""

from decimal import Decimal

import pytest
from tests.gateway.billing.ceiling_support import services
from tests.gateway.billing.media_support import b64, data_url, jpeg, pdf, png, wav, webp
from tests.support import auth, poll, request_events

from gateway.chat import service as chat
from ledger.events import RequestCompleted
from ledger.money import from_nano
from simulator.mp3 import silent_mp3

URL = "https://example.com/cat.png"


def image(url: str, detail: str | None = None) -> dict:
    return {"type": "image_url", "image_url": {"url": url, **({"detail": detail} if detail else {})}}


def chat_with(model: str, *parts: dict, **extra) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": [{"type": "text", "text": "what is it"},
                                                                     *parts]}], **extra}


def block(kind: str, mime: str, data: bytes) -> dict:
    return {"type": kind, "source": {"type": "base64", "media_type": mime, "data": b64(data)}}


def audio(fmt: str, data: bytes) -> dict:
    return {"type": "input_audio", "input_audio": {"format": fmt, "data": b64(data)}}


REQUESTS = {
    "chat gpt-4o-mini images": ("/v1/chat/completions", chat_with(
        "gpt-4o-mini", image(URL), image(data_url("image/png", png(4000, 3000))),
        image(data_url("image/jpeg", jpeg(300, 200)), "low"), max_tokens=50)),
    "chat gpt-4o image and audio": ("/v1/chat/completions", chat_with(
        "gpt-4o", image(URL, "high"), audio("wav", wav(2.5)), audio("mp3", silent_mp3(4.0)), max_tokens=50)),
    "chat gpt-4o pdf": ("/v1/chat/completions", chat_with("gpt-4o", {"type": "file", "file": {
        "file_data": data_url("application/pdf", pdf(3)), "filename": "a.pdf"}}, max_tokens=50)),
    "chat claude image": ("/v1/chat/completions", chat_with(
        "claude-haiku-4-5", image(data_url("image/webp", webp(1000, 1000))), max_tokens=50)),
    "chat gemini media": ("/v1/chat/completions", chat_with(
        "gemini-2.5-flash", image(data_url("image/png", png(2000, 2000))), audio("wav", wav(3.0)),
        {"type": "file", "file": {"file_data": data_url("application/pdf", pdf(4))}}, max_tokens=50)),
    "messages claude image and pdf": ("/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": [
        {"role": "user", "content": [block("image", "image/png", png(1920, 1080)),
                                     {"type": "image", "source": {"type": "url", "url": URL}},
                                     block("document", "application/pdf", pdf(2)),
                                     {"type": "text", "text": "compare them"}]}]}),
    "messages translated for gpt-4o-mini": ("/v1/messages", {"model": "gpt-4o-mini", "max_tokens": 50, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": URL}},
                                     {"type": "text", "text": "what is it"}]}]}),
    "responses gpt-4o-mini image": ("/v1/responses", {"model": "gpt-4o-mini", "max_output_tokens": 50, "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "what is it"},
                                     {"type": "input_image", "image_url": URL, "detail": "high"}]}]}),
    "responses translated for claude": ("/v1/responses", {"model": "claude-haiku-4-5", "max_output_tokens": 50,
                                                          "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": data_url("image/png", png(1568, 784))}]}]}),
}


@pytest.mark.parametrize("name", REQUESTS)
async def test_a_request_with_media_holds_at_least_what_its_provider_bills(gateway, name):
    # A URL image's worst case is a whole context at the dearest prompt price (Claude's one-hour
    # cache write): more than the usual 100 INR on Sonnet 4.5.
    org = await gateway.new_org("1000")
    path, body = REQUESTS[name]
    response = await gateway.client.post(path, json=body, headers=auth(org["api_key"]))
    assert response.status == 200, await response.text()
    [charge] = await poll(lambda: request_events(gateway), bool)
    assert charge.cost_inr_nano > 0 and charge.anomaly == "" and charge.charged_inr_nano == charge.cost_inr_nano
    log = await (await gateway.client.get("/v1/logs", headers=auth(org["api_key"]))).json()
    assert [item.get("anomaly") or "" for item in log["data"]] == [""]
    metrics = await (await gateway.client.get("/metrics")).text()
    assert not [line for line in metrics.splitlines() if line.startswith("gateway_charge_anomalies_total{")]


async def test_the_simulator_bills_media_as_the_provider_does(gateway, org):
    """Without media bounds these held a few tokens and were charged thousands: gpt-4o-mini
    bills an image of unknown size (a URL) as the largest its tile rule allows."""
    response = await gateway.client.post("/v1/chat/completions", json=chat_with("gpt-4o-mini", image(URL)),
                                         headers=auth(org["api_key"]))
    assert (await response.json())["usage"]["prompt_tokens"] >= 2833 + 8 * 5667


# -- a key's budget --------------------------------------------------------------------------------

BUDGETED = chat_with("gpt-4o-mini", image(URL), image(data_url("image/png", png(1024, 1024))), max_tokens=20)


async def key_with_budget(gateway, org: dict, nano: int) -> dict:
    response = await gateway.client.post("/v1/keys", headers=auth(org["api_key"]), json={
        "name": "images", "budget_inr": str(from_nano(nano)), "budget_period": "total"})
    assert response.status == 201, await response.text()
    return await response.json()


def worst_case() -> int:
    """What BUDGETED holds on gpt-4o-mini, in nano-INR: its images at their most, 20 tokens out."""
    ceiling = chat.ceiling(services(), BUDGETED)  # type: ignore[arg-type]  # what it reads of Services
    return ceiling(services().catalogue.resolve("gpt-4o-mini"))


async def test_a_budget_just_below_an_image_requests_worst_case_refuses_it(gateway, org):
    worst = worst_case()
    assert worst > from_nano(0) and Decimal(worst) / 10**9 > Decimal("0.5")  # ~0.7 INR of images, not ~0.01 of bytes
    key = await key_with_budget(gateway, org, worst - 1)
    response = await gateway.client.post("/v1/chat/completions", json=BUDGETED, headers=auth(key["api_key"]))
    assert response.status == 402 and (await response.json())["error"]["code"] == "key_budget_exceeded"


async def test_a_budget_just_above_it_admits_it_and_is_never_passed(gateway, org):
    worst = worst_case()
    key = await key_with_budget(gateway, org, worst + 1)
    response = await gateway.client.post("/v1/chat/completions", json=BUDGETED, headers=auth(key["api_key"]))
    assert response.status == 200, await response.text()
    charge: RequestCompleted = (await poll(lambda: request_events(gateway), bool))[0]
    assert charge.anomaly == "" and 0 < charge.charged_inr_nano <= worst
    listed = await (await gateway.client.get("/v1/keys", headers=auth(org["api_key"]))).json()
    item = next(item for item in listed["data"] if item["id"] == key["id"])
    assert Decimal(str(item["spent_inr"])) * 10**9 == charge.charged_inr_nano <= worst + 1
    again = await gateway.client.post("/v1/chat/completions", json=BUDGETED, headers=auth(key["api_key"]))
    assert again.status == 402  # what is left cannot hold another
