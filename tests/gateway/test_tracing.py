"""OpenTelemetry traces from outside (issue 29): a real OTLP/HTTP receiver (the collector's protocol,
protobuf decoded with the official `opentelemetry-proto`) gets, for a request made with the
official SDK, a server span whose GenAI attributes match the request's ledger record and id, a
client span per upstream attempt (a failover shows both), and the ledger commit; the client's
`traceparent` is continued and passed upstream; no prompt text unless turned on; nothing at all
when no endpoint is set; a collector that is down costs a request nothing."""

import asyncio
import time
from decimal import Decimal

import msgspec
import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from gateway.config import TelemetryConfig
from gateway.edge.state import TRACING
from gateway.telemetry.settings import otlp_endpoint
from tests.gateway.gateway_helpers import closed_port, gateway_process, json_lines, write_config
from tests.support import PROVIDER_KEY, auth, chat_body, clean_env, request_events, upstream_requests

openai = pytest.importorskip("openai")
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


@pytest.fixture
def quick_batches(monkeypatch):
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # the SDK's batch delay, in ms (default 5 s)


def traced(config, collector: Collector, **settings):
    return msgspec.structs.replace(config, telemetry=TelemetryConfig(otlp_endpoint=collector.url, **settings))


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
    attributes = server["attributes"]
    assert attributes["gateway.request_id"] == request_id == event.request_id
    assert (attributes["gen_ai.operation.name"], attributes["gen_ai.request.model"],
            attributes["gen_ai.response.model"], attributes["gen_ai.provider.name"]) == (
        "chat", "gpt-4o-mini", event.model, event.provider)
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (
        event.prompt_tokens, event.completion_tokens)
    assert (attributes["gateway.charged_inr_nano"], attributes["gateway.cost_usd_nano"]) == (
        event.charged_inr_nano, event.cost_usd_nano) and event.charged_inr_nano > 0
    assert (attributes["http.route"], attributes["http.response.status_code"]) == ("/v1/chat/completions", 200)
    assert attempt["kind"] == "client" and attempt["parent"] == server["span_id"]
    assert commits and all(commit["parent"] == server["span_id"] for commit in commits)  # its hold, its charge
    assert attempt["attributes"]["gen_ai.provider.name"] == "openai"
    assert attempt["attributes"]["http.response.status_code"] == 200
    [upstream] = await upstream_requests(gateway, simulator)
    assert upstream["headers"]["traceparent"].split("-")[1:3] == [TRACE_ID, attempt["span_id"]]
    assert "a secret prompt" not in repr(collector.spans)  # no text unless the operator turns it on


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
                      key=lambda s: s["name"])
    assert [(s["attributes"]["gen_ai.provider.name"], s["attributes"]["http.response.status_code"], s["status"])
            for s in attempts] == [("groq", 502, 2), ("openrouter", 200, 0)]
    assert attempts[0]["attributes"]["error.type"] == "connection"
    assert server["attributes"]["gen_ai.provider.name"] == "openrouter"


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


async def test_nothing_is_traced_without_an_endpoint_and_a_dead_collector_costs_nothing(make_gateway, config,
                                                                                        collector):
    quiet = await make_gateway(config)
    assert quiet.server.app[TRACING] is None
    assert otlp_endpoint(TelemetryConfig(), {}) is None
    assert otlp_endpoint(TelemetryConfig(otlp_endpoint="http://c:4318"), {"OTEL_SDK_DISABLED": "true"}) is None
    assert otlp_endpoint(TelemetryConfig(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}) == "http://c:4318/v1/traces"
    assert otlp_endpoint(TelemetryConfig(otlp_endpoint="http://x"), {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c/t"}) == "http://c/t"
    down = await make_gateway(msgspec.structs.replace(
        config, telemetry=TelemetryConfig(otlp_endpoint=f"http://127.0.0.1:{closed_port()}")))
    org = await down.new_org("100")
    started = time.monotonic()
    for _ in range(20):
        answer = await down.client.post("/v1/chat/completions", json=chat_body(), headers=auth(org["api_key"]))
        assert answer.status == 200
    assert time.monotonic() - started < 5  # spans wait in the batch queue; no request waits on them
    assert collector.spans == []


async def test_a_served_gateway_exports_by_the_standard_variables(tmp_path, collector, sim_url):
    path = write_config(tmp_path, f"""
[ledger]
url = "sqlite:///{tmp_path}/ledger.db"
[providers.openai]
base_url = "{sim_url}/v1"
api_key = "{PROVIDER_KEY}"
""")
    from tests.gateway.gateway_helpers import run_cli_async
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
            attributes["http.response.status_code"]) == (line["request_id"], line["model"], line["provider"],
                                                          line["status"])
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
