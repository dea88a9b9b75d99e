"""OpenTelemetry traces: off unless an OTLP endpoint is configured (the standard `OTEL_*`
variables, or `[telemetry] otlp_endpoint`), and then one server span per request following the
GenAI semantic conventions, a client span per upstream attempt and one for the ledger commit,
exported over OTLP (HTTP/protobuf) by the official SDK in batches from its own thread.

Off, nothing here runs on a request: callers hold None instead of a `Tracing` and branch once.
On, a request's spans are parented by the W3C `traceparent` its client sent, and each upstream
attempt sends its own onwards. Prompt text is never put on a span unless `capture_content`.
"""

import json
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext

from aiohttp import web
from opentelemetry import context, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.config import TelemetryConfig
from gateway.ops.facts import RequestFacts
from ledger.events import RequestCompleted

EXPORT_TIMEOUT_S = 5.0
# W3C trace context alone (traceparent, tracestate), not the SDK's default composite, which also
# parses baggage on every request: stateless, so one serves every request.
W3C = TraceContextTextMapPropagator()
# The GenAI operation each API family performs (gen_ai.operation.name); other routes have none.
OPERATIONS: Mapping[str, str] = {
    "/v1/chat/completions": "chat", "/v1/messages": "chat", "/v1/responses": "chat",
    "/v1/completions": "text_completion", "/v1/embeddings": "embeddings", "/v1/audio/speech": "speech",
    "/v1/audio/transcriptions": "transcription", "/v1/music/generations": "generate_content",
    "/v1/realtime": "realtime",
}


class Tracing:
    """The process's tracer and its exporter, while tracing is on."""

    def __init__(self, provider: TracerProvider, capture_content: bool) -> None:
        self._provider = provider
        self.tracer = provider.get_tracer("gateway")
        self.capture_content = capture_content

    @classmethod
    def configured(cls, config: TelemetryConfig, environ: Mapping[str, str], endpoint: str) -> "Tracing":
        name = environ.get("OTEL_SERVICE_NAME", "").strip() or config.service_name
        provider = TracerProvider(resource=Resource.create({"service.name": name}))
        # The batch processor queues spans and exports them from its own thread: a request never
        # waits on the collector, and a full queue drops spans rather than holding anything up.
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=EXPORT_TIMEOUT_S)))
        return cls(provider, config.capture_content)

    def shutdown(self) -> None:
        """Export what is queued (bounded by the exporter's timeout) and stop; blocking."""
        self._provider.shutdown()

    def server_span(self, request: web.Request) -> tuple[Span, object]:
        """The request's span, child of the client's traceparent, made current; and the token that
        restores the context before it."""
        parent = W3C.extract(request.headers)
        span = self.tracer.start_span(f"{request.method} {_route(request)}", context=parent, kind=SpanKind.SERVER)
        return span, context.attach(trace.set_span_in_context(span, parent))

    def end_server_span(self, span: Span, token: object, request: web.Request, status: int,
                        facts: RequestFacts, request_id: str) -> None:
        """Its attributes, from what the request turned out to be (the same facts as its log line;
        what the ledger recorded was set as the charge committed, `charged`)."""
        if span.is_recording():  # a span the sampler dropped costs nothing more
            self._describe(span, request, status, facts, request_id)
        span.end()
        context.detach(token)  # type: ignore[arg-type]  # the token attach returned

    @staticmethod
    def _describe(span: Span, request: web.Request, status: int, facts: RequestFacts, request_id: str) -> None:
        route, model = _route(request), facts.model
        attributes: dict = {"http.request.method": request.method, "http.route": route,
                            "http.response.status_code": status, "gateway.request_id": request_id}
        if operation := OPERATIONS.get(route):
            attributes["gen_ai.operation.name"] = operation
            span.update_name(f"{operation} {model}" if model else operation)
        if model:
            attributes["gen_ai.request.model"] = model
        span.set_attributes(attributes)
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR))

    def attempt_span(self, provider: str, url: str) -> Span:
        """An upstream call's span (a child of the current request's). In a request the sampler
        dropped, the request's own (non-recording) span: its trace context still goes upstream,
        saying not sampled, and no span is made that nobody would see."""
        if not (current := trace.get_current_span()).is_recording():
            return current
        return self.tracer.start_span(f"POST {provider}", kind=SpanKind.CLIENT, attributes={
            "gen_ai.provider.name": provider, "http.request.method": "POST", "url.full": url.split("?", 1)[0]})

    @staticmethod
    def propagated(span: Span, headers: dict[str, str]) -> dict[str, str]:
        """`headers` with the W3C trace context of `span`, for the upstream to continue the trace."""
        carrier: dict[str, str] = {}
        W3C.inject(carrier, context=trace.set_span_in_context(span))
        return {**headers, **carrier}

    @staticmethod
    def ended_attempt(span: Span, status: int, error: str = "") -> None:
        span.set_attribute("http.response.status_code", status)
        if error or status >= 300:
            span.set_attribute("error.type", error or str(status))
            span.set_status(Status(StatusCode.ERROR))
        span.end()

    def committing(self, events: int) -> AbstractContextManager[Span]:
        """The span of a request's ledger commit, current while it lasts (none in a dropped request)."""
        if not (current := trace.get_current_span()).is_recording():
            return nullcontext(current)
        return self.tracer.start_as_current_span("ledger commit", kind=SpanKind.INTERNAL,
                                                 attributes={"gateway.events": events})

    def content(self, text: Mapping[str, object]) -> None:
        """A request's prompt and answer on its span, when the operator turned that on."""
        if self.capture_content:
            span = trace.get_current_span()
            span.set_attribute("gen_ai.input.messages", _json(text.get("request", text.get("prompt"))))
            span.set_attribute("gen_ai.output.messages", _json(text.get("response", text.get("lyrics"))))


class SpanCharges:
    """A charge observer (gateway.billing.observers): what the ledger recorded of the request goes
    on its span as it commits. Registered only while tracing is on."""

    async def charged(self, facts: RequestFacts, event: RequestCompleted) -> None:
        if (span := trace.get_current_span()).is_recording():
            span.set_attributes(charged_attributes(event))


def charged_attributes(record: RequestCompleted) -> dict:
    """What the ledger recorded of a request, as attributes (money exact: integers of nano-units)."""
    return {"gen_ai.provider.name": record.provider, "gen_ai.response.model": record.model,
            "gen_ai.usage.input_tokens": record.prompt_tokens, "gen_ai.usage.output_tokens": record.completion_tokens,
            "gateway.cost_usd_nano": record.cost_usd_nano, "gateway.charged_inr_nano": record.charged_inr_nano}


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _route(request: web.Request) -> str:
    """The route's template (no ids in span names), or the path when no route matched."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else request.path
