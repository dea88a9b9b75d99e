"""Logging: one canonical JSON line per request on stderr, and no secret ever in the output."""

import re
import secrets
import signal
from decimal import Decimal

import aiohttp
import pytest

from tests.support import PROVIDER_KEY, auth, chat_body, decimal_json
from gateway.ops.log_setup import Redacting
from gateway.accounts.redaction import Redactor, mask_secrets
from tests.gateway.gateway_helpers import (
    clean_env, gateway_process, json_lines, ledger_toml, one_json_object, run_cli,
    write_config,
)

CHAT = "/v1/chat/completions"


async def post(session: aiohttp.ClientSession, url: str, content: str, key: str) -> tuple[int, str, dict]:
    async with session.post(f"{url}{CHAT}", json=chat_body(content), headers=auth(key)) as response:
        return response.status, response.headers["X-Request-Id"], decimal_json(await response.read())


@pytest.fixture
async def served_traffic(tmp_path, sim_url):
    """A `gateway serve` subprocess after three requests: a success, an upstream failure, a 401.

    Returns (responses by name, the org, the bogus key, request log lines, stdout, stderr).
    """
    cfg = str(write_config(tmp_path, ledger_toml(tmp_path / "ledger.db")))
    created = run_cli("admin", "create-org", "acme", "--credits-inr", "10", "--config", cfg)
    assert created.returncode == 0, created.stderr
    org = one_json_object(created.stdout)
    bogus = "gwk_" + secrets.token_urlsafe(32)
    env = clean_env(GATEWAY_PROVIDERS_OPENAI_BASE_URL=f"{sim_url}/v1",
                    GATEWAY_PROVIDERS_OPENAI_API_KEY=PROVIDER_KEY)
    async with gateway_process("serve", "--port", "0", "--config", cfg, env=env) as served:
        url = await served.ready_url()
        async with aiohttp.ClientSession() as session:
            responses = {
                "ok": await post(session, url, "hi [sim:tokens=3]", org["api_key"]),
                "failed": await post(session, url, "hi [sim:status=503]", org["api_key"]),
                "unauthorized": await post(session, url, "hi", bogus),
            }
        assert await served.stop(signal.SIGTERM) == 0
    requests = [line for line in json_lines(served.stderr) if line.get("event") == "request"]
    return responses, org, bogus, requests, served.stdout, served.stderr


def line_for(requests: list[dict], request_id: str) -> dict:
    (line,) = [line for line in requests if line["request_id"] == request_id]
    return line


async def test_responses_are_what_the_traffic_asked_for(served_traffic):
    responses, *_ = served_traffic
    assert [status for status, _, _ in responses.values()] == [200, 502, 401]


async def test_one_request_line_per_request(served_traffic):
    responses, _, _, requests, _, _ = served_traffic
    assert len(requests) == 3
    assert sorted(line["request_id"] for line in requests) == \
        sorted(request_id for _, request_id, _ in responses.values())


async def test_every_request_line_has_the_common_fields(served_traffic):
    _, _, _, requests, _, _ = served_traffic
    for line in requests:
        assert re.fullmatch(r"req_[0-9a-f]{24}", line["request_id"])
        assert line["route"] == CHAT
        assert line["method"] == "POST"
        assert isinstance(line["status"], int)
        assert isinstance(line["latency_ms"], (int, float))
        assert line["latency_ms"] >= 0
        assert line["level"] == "info"


async def test_successful_chat_line(served_traffic):
    responses, org, _, requests, _, _ = served_traffic
    _, request_id, body = responses["ok"]
    line = line_for(requests, request_id)
    assert line["status"] == 200
    assert line["org_id"] == org["org_id"]
    assert line["model"] == "gpt-4o-mini"
    assert line["provider"] == "openai"
    assert Decimal(line["cost_inr"]) == body["usage"]["cost_inr"]
    assert Decimal(line["cost_inr"]) > 0


async def test_failed_chat_line_is_not_charged(served_traffic):
    responses, org, _, requests, _, _ = served_traffic
    _, request_id, body = responses["failed"]
    assert body["error"]["type"] == "gateway_error"
    line = line_for(requests, request_id)
    assert line["status"] == 502
    assert line["org_id"] == org["org_id"]
    assert line["model"] == "gpt-4o-mini"
    assert line["provider"] == "openai"
    assert Decimal(line["cost_inr"]) == 0


async def test_unauthorized_line_has_no_org(served_traffic):
    responses, _, _, requests, _, _ = served_traffic
    _, request_id, body = responses["unauthorized"]
    assert body["error"]["code"] == "invalid_api_key"
    line = line_for(requests, request_id)
    assert line["status"] == 401
    assert "org_id" not in line
    assert "model" not in line


async def test_no_secret_appears_in_any_output(served_traffic):
    _, org, bogus, _, stdout, stderr = served_traffic
    for secret in (org["api_key"], bogus, PROVIDER_KEY):
        assert secret not in stderr
        assert secret not in stdout
        assert secret[-20:] not in stderr  # not even a fragment of it


async def test_every_stderr_line_is_json(served_traffic):
    *_, stderr = served_traffic
    assert len(json_lines(stderr)) == len(stderr.splitlines())


# --- redact_secrets -------------------------------------------------------------------------

redact_secrets = Redacting(Redactor())  # what configure() installs without the configured keys: key shapes only


def test_redact_secrets_masks_every_key_shape_and_keeps_the_rest():
    gateway_key = "gwk_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v"
    event = {
        "event": "request",
        "status": 200,
        "latency_ms": 1.5,
        "ok": True,
        "nothing": None,
        "gateway_key": gateway_key,
        "openai_key": "sk-proj-abcdefgh12345678",
        "google_key": "AIzaSyA1234567890abcdefghijklmnop",
        "header": "Bearer some.jwt.token",
        "sentence": f"called with {gateway_key} twice: {gateway_key}.",
        "org_id": "org_0123456789abcdef01234567",
    }
    assert redact_secrets(None, "info", event) == {
        "event": "request",
        "status": 200,
        "latency_ms": 1.5,
        "ok": True,
        "nothing": None,
        "gateway_key": "[redacted]",
        "openai_key": "[redacted]",
        "google_key": "[redacted]",
        "header": "[redacted]",
        "sentence": "called with [redacted] twice: [redacted].",
        "org_id": "org_0123456789abcdef01234567",
    }


def test_redact_secrets_leaves_the_callers_dict_alone():
    event = {"key": "gwk_abcdefgh12345"}
    redact_secrets(None, "info", event)
    assert event == {"key": "gwk_abcdefgh12345"}


def test_redacting_checks_the_whole_line_at_once_yet_masks_only_the_fields_holding_a_key():
    process = Redacting(Redactor(["plain-operator-secret-99"]))
    clean = {"event": "request", "route": "/v1/chat/completions", "org_id": "org_1", "status": 200,
             "model": "gpt-4o-mini", "note": "bearer"}  # "bearer" with no token after it is no key
    assert process(None, "info", dict(clean)) == clean
    line = process(None, "info", {**clean, "detail": "got plain-operator-secret-99", "echo": "sk-abcdefgh12345678"})
    assert line == {**clean, "detail": "got [redacted]", "echo": "[redacted]"}


def test_mask_secrets_keeps_short_lookalikes():
    assert mask_secrets("gwk_short sk-short task-force") == "gwk_short sk-short task-force"


def test_mask_secrets_masks_the_bearer_scheme_in_any_case():
    assert mask_secrets("authorization: BEARER abc") == "authorization: [redacted]"
