"""Provider keys never leave the gateway, whatever their shape (issue 12, point 7).

Providers quote the key they received in their errors. Here the upstream is hostile: it quotes
the key in every 401 body and in every stream's error event (OpenAI chunk, Anthropic `error`
event, Gemini error object), and in a realtime error event and close reason, as it is, in
`Bearer <key>`, URL-encoded and JSON-escaped. Keys of no well-known prefix (an operator's
configured keys and an organization's own BYOK keys) must be nowhere: not in any response, not
in the gateway's log lines, not in any table of the ledger.
"""

import signal
import sqlite3
from pathlib import Path
from urllib.parse import quote, quote_plus

import aiohttp
import orjson
import pytest
from aiohttp import web

from gateway.ops.log_setup import Redacting
from gateway.accounts.redaction import Redactor, forms_of, keys_sent
from simulator.app import create_app as create_simulator
from simulator.settings import Settings
from tests.support import auth, transcription_form
from tests.gateway.gateway_helpers import clean_env, gateway_process, one_json_object, run_cli_async, write_config

CONFIGURED = {"openai": "opkey-operator-secret-1234", "anthropic": "opkey/anthropic+secret=5678",
              "google": "opkey google secret 9012"}
OWN = {"openai": "byok-org-own-openai-0042", "anthropic": "byok/org+own=anthropic-77",
       "google": "byok org own google 31337"}
MASTER = "test-master-key-0123456789"
RECEIVED = web.AppKey("received", set)
CHAT_MODELS = ("gpt-4o-mini", "claude-haiku-4-5", "gemini-2.5-flash")


def every_form(key: str) -> set[str]:
    """The key as a provider might quote it, and as JSON would carry those quotes."""
    plain = {key, quote(key, safe=""), quote_plus(key), f"Bearer {key}"}
    return plain | {orjson.dumps(form).decode()[1:-1] for form in plain}


CANARIES = sorted({form for key in [*CONFIGURED.values(), *OWN.values()] for form in every_form(key)}
                  | {"operator-secret", "org-own-openai", "org+own", "org own google"})


def quoted(key: str) -> str:
    return f"Incorrect API key provided: {key}. Header: 'Bearer {key}'. Query: key={quote(key, safe='')}."


def received_key(request: web.Request) -> str:
    return keys_sent(request.headers, request.query)[0]


def sse(*events: tuple[str, dict]) -> bytes:
    return b"".join((f"event: {name}\n".encode() if name else b"") + b"data: " + orjson.dumps(data) + b"\n\n"
                    for name, data in events)


async def hostile(request: web.Request) -> web.StreamResponse:
    """Streams start well and then report an error quoting the key; everything else is a 401."""
    key = received_key(request)
    request.app[RECEIVED].add(key)
    body = orjson.loads(await request.read()) if request.content_type == "application/json" else {}
    if request.path.endswith(":streamGenerateContent"):
        return web.Response(body=sse(("", {"error": {"code": 500, "message": quoted(key), "status": "INTERNAL"}})),
                            content_type="text/event-stream")
    if body.get("stream") and request.path.endswith("/v1/messages"):
        start = {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 1, "output_tokens": 0}}}
        error = {"type": "error", "error": {"type": "overloaded_error", "message": quoted(key)}}
        return web.Response(body=sse(("message_start", start), ("error", error)), content_type="text/event-stream")
    if body.get("stream"):
        return web.Response(body=sse(("", {"error": {"message": quoted(key), "type": "server_error"}})),
                            content_type="text/event-stream")
    return web.json_response({"error": {"message": quoted(key), "type": "invalid_request_error"}}, status=401)


async def hostile_realtime(request: web.Request) -> web.WebSocketResponse:
    key = received_key(request)
    request.app[RECEIVED].add(key)
    ws = web.WebSocketResponse(protocols=("realtime",))
    await ws.prepare(request)
    await ws.send_str(orjson.dumps({"type": "error", "error": {"message": quoted(key)}}).decode())
    await ws.close(code=4001, message=f"bad key {key}"[:100].encode())
    return ws


@pytest.fixture
async def hostile_upstream(aiohttp_server):
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[RECEIVED] = set()
    app.router.add_get("/v1/realtime", hostile_realtime)
    app.router.add_route("*", "/{path:.*}", hostile)
    return await aiohttp_server(app)


def config_toml(tmp_path: Path, upstream: str) -> str:
    providers = "".join(f'[providers.{name}]\nbase_url = "{upstream}{"/v1" if name == "openai" else ""}"\n'
                        f'api_key = "{key}"\ntimeout_s = 5\n' for name, key in CONFIGURED.items())
    return (f'[ledger]\nurl = "sqlite:///{tmp_path}/ledger.db"\n[secrets]\nmaster_key = "{MASTER}"\n'
            f'[server]\nport = 0\n{providers}')


async def cli(config: Path, *args: str, **env: str) -> dict:
    done = await run_cli_async(*args, "--config", str(config), env=clean_env(**env))
    assert done.returncode == 0, done.stderr
    return one_json_object(done.stdout)


async def collect(session: aiohttp.ClientSession, method: str, url: str, **kwargs) -> str:
    async with session.request(method, url, **kwargs) as response:
        return f"{response.status} {dict(response.headers)} {await response.text(errors='replace')}"


async def realtime(session: aiohttp.ClientSession, url: str, key: str) -> str:
    seen = []
    async with session.ws_connect(f"{url}/v1/realtime?model=gpt-4o-realtime-preview", headers=auth(key),
                                  protocols=("realtime",)) as ws:
        async for message in ws:
            seen.append(str(message.data))
        seen.append(f"close {ws.close_code} {message.extra if message else ''}")
    return "\n".join(seen)


async def every_route(url: str, key: str) -> list[str]:
    """Each route once per provider, plain and streamed, the full answers as text."""
    bodies = []
    async with aiohttp.ClientSession(headers=auth(key)) as session:
        for model in CHAT_MODELS:
            for stream in (False, True):
                chat = {"model": model, "max_tokens": 16, "stream": stream,
                        "messages": [{"role": "user", "content": "hi"}]}
                bodies.append(await collect(session, "POST", f"{url}/v1/chat/completions", json=chat))
                bodies.append(await collect(session, "POST", f"{url}/v1/messages", json=chat))
        bodies.append(await collect(session, "POST", f"{url}/v1/embeddings",
                                    json={"model": "text-embedding-3-small", "input": "hi"}))
        bodies.append(await collect(session, "POST", f"{url}/v1/audio/speech",
                                    json={"model": "tts-1", "input": "hi", "voice": "alloy"}))
        bodies.append(await collect(session, "POST", f"{url}/v1/audio/transcriptions",
                                    data=transcription_form(b"\xff\xfb" * 2048)))
        bodies.append(await collect(session, "POST", f"{url}/v1/music",
                                    json={"model": "tune-3-clip-preview", "prompt": "a song"}))
        bodies.append(await realtime(session, url, key))
    return bodies


def ledger_text(db: Path) -> str:
    """Every row of every table of the ledger, as text (bytes decoded leniently)."""
    connection = sqlite3.connect(db)
    try:
        tables = [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        rows = [row for table in tables for row in connection.execute(f'SELECT * FROM "{table}"')]
    finally:
        connection.close()
    return "\n".join(str([v.decode(errors="replace") if isinstance(v, bytes) else v for v in row]) for row in rows)


def leaks(text: str) -> list[str]:
    return [canary for canary in CANARIES if canary in text]


async def test_no_provider_key_reaches_a_client_a_log_or_the_ledger(tmp_path, hostile_upstream):
    upstream = str(hostile_upstream.make_url("")).rstrip("/")
    config = write_config(tmp_path, config_toml(tmp_path, upstream))
    paying = await cli(config, "admin", "create-org", "paying", "--credits-inr", "100")
    own = await cli(config, "admin", "create-org", "own-keys")
    for provider, key in OWN.items():
        await cli(config, "admin", "set-provider-key", own["org_id"], provider, "env:OWN_KEY", OWN_KEY=key)
    async with gateway_process("serve", "--config", str(config), env=clean_env()) as served:
        url = await served.ready_url()
        answers = await every_route(url, paying["api_key"]) + await every_route(url, own["api_key"])
        assert await served.stop(signal.SIGTERM) == 0
    # The upstream really was sent every key, and quoted each one back.
    assert hostile_upstream.app[RECEIVED] == {*CONFIGURED.values(), *OWN.values()}
    text = "\n".join(answers)
    assert text.count("[redacted]") >= 2 * 16, text
    assert leaks(text) == [], text
    assert served.stderr.count('"event":"request"') == len(answers)  # one line per request, none leaking
    assert leaks(served.stderr) == []
    assert leaks(ledger_text(tmp_path / "ledger.db")) == []


async def test_the_simulator_can_quote_the_key_it_received(aiohttp_client):
    client = await aiohttp_client(create_simulator(Settings(echo_key=True)))
    key = "opkey/operator secret"
    response = await client.post("/v1/chat/completions", json={}, headers=auth(key))
    message = (await response.json())["error"]["message"]
    assert response.status == 401 and key in message and quote(key, safe="") in message
    gemini = await client.post("/v1beta/models/gemini-2.5-flash:generateContent", json={},
                               headers={"x-goog-api-key": key})
    assert gemini.status == 401 and key in (await gemini.json())["error"]["message"]


async def test_the_simulator_echo_is_redacted_on_its_way_through_the_gateway(make_gateway, config, aiohttp_server):
    import msgspec

    echoing = await aiohttp_server(create_simulator(Settings(echo_key=True)))
    base = str(echoing.make_url("")).rstrip("/")
    openai = msgspec.structs.replace(config.providers["openai"], base_url=f"{base}/v1",
                                     api_key=CONFIGURED["openai"])
    gateway = await make_gateway(msgspec.structs.replace(
        config, providers={**config.providers, "openai": openai}))
    org = await gateway.new_org("10")
    response = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]),
                                         json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    body = await response.text()
    assert response.status == 502 and "[redacted]" in body and leaks(body) == []
    assert leaks(str([r.event for r in await gateway.events()])) == []


def test_log_lines_lose_every_configured_key_whatever_field_holds_it():
    process = Redacting(Redactor(CONFIGURED.values()))
    line = process(None, "error", {"event": "upstream_failed", "error": quoted(CONFIGURED["google"]),
                                    "detail": f"sent {CONFIGURED['anthropic']}", "status": 401})
    assert leaks(str(line)) == [] and line["status"] == 401 and line["event"] == "upstream_failed"


def test_a_redactor_removes_every_form_of_its_keys_and_the_request_key():
    redactor = Redactor(["opkey-operator-secret-1234", "short"]).including("byok/own key")
    text = ("opkey-operator-secret-1234 | Bearer opkey-operator-secret-1234 | byok%2Fown%20key | byok%2Fown+key"
            " | byok/own key | short stays")
    assert redactor(text) == "[redacted] | [redacted] | [redacted] | [redacted] | [redacted] | short stays"
    assert Redactor().including("")("nothing to hide") == "nothing to hide"
    assert set(forms_of(["a/b c+d=efgh"])) >= {"a/b c+d=efgh", "a%2Fb%20c%2Bd%3Defgh", "a%2Fb+c%2Bd%3Defgh"}
