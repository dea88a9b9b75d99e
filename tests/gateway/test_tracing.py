"""OpenTelemetry traces from outside (issue 29): a real OTLP/HTTP receiver (the collector's protocol,
protobuf decoded with the official `opentelemetry-proto`) gets, for a request made with the
official SDK, a server span whose GenAI attributes match the request's ledger record and id, a
client span per upstream attempt (a failover shows both), and the ledger commit; the client's
`traceparent` is continued and passed upstream; no prompt text unless turned on; nothing at all
when no endpoint is set; a collector that is down costs a request nothing."""

import asyncio
import os
import subprocess
import sys
import time
from decimal import Decimal

import msgspec
import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from gateway.config import TelemetryConfig
from gateway.edge.state import TRACING
from gateway.routes import ENDPOINTS
from gateway.telemetry.settings import otlp_endpoint
from gateway.telemetry.tracing import OPERATIONS
from tests.gateway.gateway_helpers import closed_port, gateway_process, json_lines, run_cli_async, write_config
from tests.support import PROVIDER_KEY, auth, chat_body, clean_env, request_events, upstream_requests

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"
KINDS = {1: "internal", 2: "server", 3: "client"}


class Collector:
    """What an OTLP collector receives at POST /v1/traces, span by span."""

    def __init__(self) -> None:
        self.spans: list[dict] = []
        self.resources: list[dict] = []

    async def traces(self, request: web.Request) -> web.Response:
        assert request.content_type == "application/x-protobuf"
        export = ExportTraceServiceRequest()
        export.ParseFromString(await request.read())
        for resource_spans in export.resource_spans:
            self.resources.append({a.key: _value(a.value) for a in resource_spans.resource.attributes})
            for scope in resource_spans.scope_spans:
                self.spans += [_span(span) for span in scope.spans]
        return web.Response(status=200, content_type="application/x-protobuf", body=b"")

    def named(self, prefix: str) -> list[dict]:
        return [span for span in self.spans if span["name"].startswith(prefix)]


async def until(holds, timeout: float = 5.0) -> None:
    """Wait until `holds()` (the batch processor exports from its own thread, a little later)."""
    deadline = time.monotonic() + timeout
    while not holds():
        assert time.monotonic() < deadline, "the collector never received the spans awaited"
        await asyncio.sleep(0.02)


def _value(value) -> object:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def _span(span) -> dict:
    return {"name": span.name, "kind": KINDS.get(span.kind, span.kind), "trace_id": span.trace_id.hex(),
            "span_id": span.span_id.hex(), "parent": span.parent_span_id.hex(), "status": span.status.code,
            "attributes": {a.key: _value(a.value) for a in span.attributes}}


@pytest.fixture
async def collector(aiohttp_server):
    collecting = Collector()
    app = web.Application()
    app.router.add_post("/v1/traces", collecting.traces)
    server = await aiohttp_server(app)
    collecting.url = f"http://127.0.0.1:{server.port}"
    return collecting


@pytest.fixture(autouse=True)
def no_otel_env(monkeypatch):
    """A developer's own OTEL_* variables must not decide what these gateways trace."""
    for name in [name for name in os.environ if name.startswith("OTEL_")]:
        monkeypatch.delenv(name)


@pytest.fixture
def quick_batches(monkeypatch):
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # the SDK's batch delay, in ms (default 5 s)


def traced(config, collector: Collector, **settings):
    return msgspec.structs.replace(config, telemetry=TelemetryConfig(otlp_endpoint=collector.url, **settings))


def servers(collector: Collector) -> dict[str, dict]:
    """The server spans received, by their request id."""
    return {span["attributes"]["gateway.request_id"]: span for span in collector.spans if span["kind"] == "server"}


def assert_is_its_record(span: dict, event) -> None:
    """The span says what the request's ledger event says: model, provider, tokens, money, status."""
    attributes = span["attributes"]
    assert (attributes["gateway.request_id"], attributes["gen_ai.response.model"], attributes["gen_ai.provider.name"],
            attributes["http.response.status_code"]) == (event.request_id, event.model, event.provider, event.status)
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (
        event.prompt_tokens, event.completion_tokens)
    assert (attributes["gateway.cost_inr_nano"], attributes["gateway.charged_inr_nano"]) == (
        event.cost_inr_nano, event.charged_inr_nano) and event.charged_inr_nano > 0


@pytest.mark.usefixtures("quick_batches")
async def test_a_request_is_one_server_span_with_its_charge_attempts_and_commit(make_gateway, config, collector,
                                                                                  simulator):
    gateway = await make_gateway(traced(config, collector))
    org = await gateway.new_org("100")
    client = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0,
                                default_headers={"traceparent": TRACEPARENT})
    raw = await client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "a secret prompt [sim:tokens=7]"}])
    request_id = raw.headers["x-request-id"]
    await until(lambda: len(collector.named("chat")) == 1)
    [server], [attempt], commits = collector.named("chat"), collector.named("POST"), collector.named("ledger commit")
    [event] = await request_events(gateway)
    assert server["name"] == "chat gpt-4o-mini" and server["kind"] == "server"
    assert (server["trace_id"], server["parent"]) == (TRACE_ID, CLIENT_SPAN)  # the client's trace, continued
    assert_is_its_record(server, event)
    attributes = server["attributes"]
    assert attributes["gateway.request_id"] == request_id
    assert (attributes["gen_ai.operation.name"], attributes["gen_ai.request.model"], attributes["gateway.org_id"],
            attributes["http.request.method"], attributes["http.route"]) == (
        "chat", "gpt-4o-mini", org["org_id"], "POST", "/v1/chat/completions")
    assert attempt["kind"] == "client" and attempt["parent"] == server["span_id"]
    assert (attempt["attributes"]["gen_ai.provider.name"], attempt["attributes"]["http.response.status_code"],
            attempt["attributes"]["gateway.failover.index"]) == ("openai", 200, 0)
    # Its durable writes (its hold, its charge), children of the request's span
    assert commits and all(commit["parent"] == server["span_id"] and commit["kind"] == "internal"
                           for commit in commits)
    [upstream] = await upstream_requests(gateway, simulator)
    assert upstream["headers"]["traceparent"].split("-")[1:3] == [TRACE_ID, attempt["span_id"]]
    assert "a secret prompt" not in repr(collector.spans)  # no text unless the operator turns it on


@pytest.mark.usefixtures("quick_batches", "no_anthropic_env")
async def test_a_streamed_chat_and_an_anthropic_message_are_spans_of_their_records(make_gateway, config, collector):
    gateway = await make_gateway(traced(config, collector))
    org = await gateway.new_org("100")
    chat = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0)
    raw = await chat.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi [sim:tokens=5]"}], stream=True)
    streamed = [chunk async for chunk in raw.parse()]
    assert streamed
    claude = anthropic.AsyncAnthropic(base_url=gateway.url, api_key=org["api_key"], max_retries=0)
    message = await claude.messages.with_raw_response.create(
        model="claude-haiku-4-5", max_tokens=20, messages=[{"role": "user", "content": "hi [sim:tokens=3]"}])
    ids = [raw.headers["x-request-id"], message.headers["request-id"]]
    await until(lambda: set(ids) <= set(servers(collector)))
    events = {event.request_id: event for event in await request_events(gateway)}
    for request_id, name, route in zip(ids, ("chat gpt-4o-mini", "chat claude-haiku-4-5"),
                                       ("/v1/chat/completions", "/v1/messages"), strict=True):
        span = servers(collector)[request_id]
        assert (span["name"], span["attributes"]["http.route"]) == (name, route)
        assert_is_its_record(span, events[request_id])
    assert events[ids[0]].stream and events[ids[1]].provider == "anthropic"


@pytest.mark.usefixtures("quick_batches")
async def test_a_failover_shows_each_attempt(make_gateway, config, collector):
    dead = msgspec.structs.replace(config.providers["groq"], base_url=f"http://127.0.0.1:{closed_port()}/v1")
    gateway = await make_gateway(traced(msgspec.structs.replace(config, providers={**config.providers, "groq": dead}),
                                        collector))
    org = await gateway.new_org("10")
    answer = await gateway.client.post("/v1/chat/completions", headers=auth(org["api_key"]), json={
        "model": "gpt-oss-120b", "messages": [{"role": "user", "content": "hi"}]})
    assert answer.status == 200
    await until(lambda: len(collector.named("chat")) == 1)
    [server] = collector.named("chat")
    attempts = sorted((s for s in collector.named("POST") if s["parent"] == server["span_id"]),
                      key=lambda s: s["attributes"]["gateway.failover.index"])
    assert [(s["attributes"]["gateway.failover.index"], s["attributes"]["gen_ai.provider.name"],
             s["attributes"]["http.response.status_code"], s["status"]) for s in attempts] == [
        (0, "groq", 502, 2), (1, "openrouter", 200, 0)]  # status 2: error
    assert attempts[0]["attributes"]["error.type"] == "connection"
    [event] = await request_events(gateway)
    assert_is_its_record(server, event)
    assert [a.provider for a in event.attempts] == ["groq", "openrouter"]


@pytest.mark.usefixtures("quick_batches")
async def test_prompt_text_only_when_the_operator_turns_it_on(make_gateway, config, collector):
    gateway = await make_gateway(traced(config, collector, capture_content=True))
    org = await gateway.new_org("100")
    answer = await gateway.client.post("/v1/chat/completions", json=chat_body("a prompt to show"),
                                       headers=auth(org["api_key"]))
    assert answer.status == 200
    await until(lambda: len(collector.named("chat")) == 1)
    [server] = collector.named("chat")
    assert "a prompt to show" in server["attributes"]["gen_ai.input.messages"]
    assert server["attributes"]["gen_ai.output.messages"]


async def test_nothing_is_traced_or_sent_upstream_without_an_endpoint(make_gateway, config, collector, simulator):
    quiet = await make_gateway(config)
    assert quiet.server.app[TRACING] is None
    org = await quiet.new_org("100")
    answer = await quiet.client.post("/v1/chat/completions", json=chat_body(),
                                     headers={**auth(org["api_key"]), "traceparent": TRACEPARENT})
    assert answer.status == 200
    [upstream] = await upstream_requests(quiet, simulator)
    assert "traceparent" not in {name.lower() for name in upstream["headers"]}  # off: nothing is added
    assert collector.spans == []


def test_a_gateway_without_traces_never_loads_the_trace_sdk():
    # (redis-py imports the OpenTelemetry API and metrics SDK by itself, idle unless configured)
    code = ("import sys, gateway.app, gateway.cli, gateway.server\n"
            "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk.trace', "
            "'opentelemetry.exporter', 'gateway.telemetry.tracing'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


async def test_a_dead_collector_costs_a_request_nothing(make_gateway, config, monkeypatch, caplog):
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "4")  # full after two requests: the rest are dropped
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4")
    down = await make_gateway(msgspec.structs.replace(
        config, telemetry=TelemetryConfig(otlp_endpoint=f"http://127.0.0.1:{closed_port()}")))
    org = await down.new_org("100")
    started = time.monotonic()
    for _ in range(20):
        answer = await down.client.post("/v1/chat/completions", json=chat_body(), headers=auth(org["api_key"]))
        assert answer.status == 200
    # Spans wait in the batch queue; no request waits on them. Requests that did would wait out the
    # exporter's retries (EXPORT_TIMEOUT_S, 5 s) in turn: the bound is far from that, and from 20
    # requests on a loaded machine.
    assert time.monotonic() - started < 20
    # The queue was full, and the SDK said so once (its own filter: once in 20 s), not once a span
    dropped = [r for r in caplog.records if r.name.startswith("opentelemetry") and "Queue full" in r.getMessage()]
    assert 1 <= len(dropped) <= 2


async def test_the_standard_variables_choose_the_endpoint_or_turn_traces_off(make_gateway, config, collector,
                                                                             monkeypatch):
    assert otlp_endpoint(TelemetryConfig(), {}) is None
    assert otlp_endpoint(TelemetryConfig(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}) == "http://c:4318/v1/traces"
    assert otlp_endpoint(TelemetryConfig(otlp_endpoint="http://c:4318/v1/traces"), {}) == "http://c:4318/v1/traces"
    assert otlp_endpoint(TelemetryConfig(otlp_endpoint="http://x"), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}) == (
        "http://c/v1/traces")
    elsewhere = msgspec.structs.replace(config, telemetry=TelemetryConfig(
        otlp_endpoint=f"http://127.0.0.1:{closed_port()}"))
    for off in ({"OTEL_SDK_DISABLED": "true"}, {"OTEL_TRACES_EXPORTER": "none"}):
        with monkeypatch.context() as env:
            for name, value in off.items():
                env.setenv(name, value)
            assert (await make_gateway(elsewhere)).server.app[TRACING] is None
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{collector.url}/v1/traces")  # as it is; wins
    gateway = await make_gateway(elsewhere)
    org = await gateway.new_org("100")
    answer = await gateway.client.post("/v1/chat/completions", json=chat_body(), headers=auth(org["api_key"]))
    assert answer.status == 200
    await until(lambda: len(collector.named("chat")) == 1)


async def test_a_served_gateway_exports_by_the_standard_variables(tmp_path, collector, sim_url):
    path = write_config(tmp_path, f"""
[ledger]
url = "sqlite:///{tmp_path}/ledger.db"
[providers.openai]
base_url = "{sim_url}/v1"
api_key = "{PROVIDER_KEY}"
""")
    org = msgspec.json.decode((await run_cli_async("admin", "create-org", "t", "--credits-inr", "10",
                                                   "--config", str(path))).stdout)
    env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, OTEL_SERVICE_NAME="gw-under-test",
                    OTEL_BSP_SCHEDULE_DELAY="50")
    async with gateway_process("serve", "--port", "0", "--config", str(path), env=env) as served:
        client = openai.AsyncOpenAI(base_url=f"{await served.ready_url()}/v1", api_key=org["api_key"], max_retries=0)
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        await until(lambda: len(collector.named("chat")) == 1, timeout=10)
        await served.stop()
    assert {"service.name": "gw-under-test"}.items() <= collector.resources[0].items()
    [line] = [line for line in json_lines(served.stderr) if line.get("event") == "request"
              and line.get("route") == "/v1/chat/completions"]
    [span] = collector.named("chat")
    attributes = span["attributes"]  # the span says what the request's log line says
    assert (attributes["gateway.request_id"], attributes["gen_ai.request.model"], attributes["gen_ai.provider.name"],
            attributes["http.response.status_code"], attributes["gateway.org_id"]) == (
        line["request_id"], line["model"], line["provider"], line["status"], line["org_id"])
    assert Decimal(line["cost_inr"]) * 10**9 == attributes["gateway.charged_inr_nano"] > 0


@pytest.mark.usefixtures("quick_batches")
async def test_a_request_its_client_did_not_sample_makes_no_span_and_says_so_upstream(make_gateway, config,
                                                                                      collector, simulator):
    gateway = await make_gateway(traced(config, collector))
    org = await gateway.new_org("100")
    answer = await gateway.client.post("/v1/chat/completions", json=chat_body(), headers={
        **auth(org["api_key"]), "traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-00"})
    assert answer.status == 200
    [upstream] = await upstream_requests(gateway, simulator)
    assert upstream["headers"]["traceparent"].split("-")[1::2] == [TRACE_ID, "00"]  # its trace, not sampled
    sampled = await gateway.client.post("/v1/chat/completions", json=chat_body(), headers=auth(org["api_key"]))
    assert sampled.status == 200
    await until(lambda: len(collector.named("chat")) == 1)  # the next request's spans come; none of the first's
    assert all(span["trace_id"] != TRACE_ID for span in collector.spans)


def test_every_operation_names_a_route():
    """The GenAI operation names are keyed by routes that exist (a renamed route would lose its name)."""
    assert set(OPERATIONS) <= {endpoint.line for endpoint in ENDPOINTS}
