"""OpenTelemetry traces: off unless an OTLP endpoint is configured (the standard `OTEL_*`
variables, or `[telemetry] otlp_endpoint`), and then one server span per request following the
GenAI semantic conventions, a client span per upstream attempt and one for the ledger commit,
exported over OTLP (HTTP/protobuf) by the official SDK in batches from its own thread.

Off, nothing here runs on a request: callers hold None instead of a `Tracing` and branch once.
On, a request's spans are parented by the W3C `traceparent` its client sent, and each upstream
attempt sends its own onwards; what the request's code learns on the way (its record, its
attempts) is gathered in its `Traced` and set on its span in one call as it ends. Prompt text is
never put on a span unless `capture_content`.
"""

import json
from collections.abc import Awaitable, Mapping

from aiohttp import web
from opentelemetry import context, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.config import TelemetryConfig
from gateway.ops.facts import RequestFacts
from ledger.events import RequestCompleted

EXPORT_TIMEOUT_S = 5.0
# W3C trace context alone (traceparent, tracestate), not the SDK's default composite, which also
# parses baggage on every request: stateless, so one serves every request.
W3C = TraceContextTextMapPropagator()
# The GenAI operation each model route performs (gen_ai.operation.name), by `METHOD /template` as
# the route table names it (GET /v1/music is a history, POST /v1/music a generation); the names
# the conventions lack (speech, transcription, realtime) say what the route does.
OPERATIONS: Mapping[str, str] = {
    "POST /v1/chat/completions": "chat", "POST /v1/messages": "chat", "POST /v1/responses": "chat",
    "POST /v1/completions": "text_completion", "POST /v1/embeddings": "embeddings",
    "POST /v1/audio/speech": "speech", "POST /v1/audio/transcriptions": "transcription",
    "POST /v1/music": "generate_content", "GET /v1/realtime": "realtime",
}
# The request's `Traced`, in its trace context: what code deeper in the request (an upstream call,
# a charge) learns of it is gathered there, and set on its span at once when it ends.
REQUEST = context.create_key("gateway.request")


class Traced:
    """A request's server span while it lasts; the attributes its spans learned meanwhile; the
    upstream attempts it made so far (a client span's failover index, 0 for the first)."""

    __slots__ = ("attempts", "attributes", "span", "token")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.attributes: dict[str, AttributeValue] = {}
        self.attempts = 0
        self.token: object = None  # what restores the context before the request's (context.detach)

    def attempt(self) -> int:
        self.attempts += 1
        return self.attempts - 1


class Tracing:
    """The process's tracer and its exporter, while tracing is on. Each span's attributes are set
    in one call (the SDK checks every attribute on every call: fewer calls, less work)."""

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

    def server_span(self, request: web.Request) -> Traced:
        """The request's span, child of the client's traceparent, made current until it ends."""
        parent = W3C.extract(request.headers)
        span = self.tracer.start_span(f"{request.method} {_route(request)}", context=parent, kind=SpanKind.SERVER)
        traced = Traced(span)
        traced.token = context.attach(context.set_value(REQUEST, traced, trace.set_span_in_context(span, parent)))
        return traced

    def end_server_span(self, traced: Traced, request: web.Request, status: int, facts: RequestFacts,
                        request_id: str, org_id: str | None) -> None:
        """Its attributes: what the request turned out to be (the facts of its log line, its org
        when it had a key) and what its spans learned (its ledger record: `SpanCharges`)."""
        if (span := traced.span).is_recording():  # a span the sampler dropped costs nothing more
            attributes = _described(span, request, status, facts, request_id)
            if org_id:
                attributes["gateway.org_id"] = org_id
            span.set_attributes({**attributes, **traced.attributes})
        span.end()
        context.detach(traced.token)  # type: ignore[arg-type]  # the token attach returned

    def attempt_span(self, provider: str, url: str) -> Span:
        """An upstream call's span (a child of the current request's). In a request the sampler
        dropped, the request's own (non-recording) span: its trace context still goes upstream,
        saying not sampled, and no span is made that nobody would see."""
        if not (current := trace.get_current_span()).is_recording():
            return current
        traced = context.get_value(REQUEST)
        return self.tracer.start_span(f"POST {provider}", kind=SpanKind.CLIENT, attributes={
            "gen_ai.provider.name": provider, "url.full": url.split("?", 1)[0],
            "gateway.failover.index": traced.attempt() if isinstance(traced, Traced) else 0})

    @staticmethod
    def propagated(span: Span, headers: dict[str, str]) -> dict[str, str]:
        """`headers` with the W3C trace context of `span`, for the upstream to continue the trace."""
        carrier: dict[str, str] = {}
        W3C.inject(carrier, context=trace.set_span_in_context(span))
        return {**headers, **carrier}

    @staticmethod
    def ended_attempt(span: Span, status: int, error: str = "") -> None:
        """The attempt's end: its status (0: it had none, cancelled), and why it failed if it did."""
        if error or status >= 300:
            span.set_attributes({"http.response.status_code": status, "error.type": error or str(status)}
                                if status else {"error.type": error})
            span.set_status(Status(StatusCode.ERROR))
        else:
            span.set_attribute("http.response.status_code", status)
        span.end()

    async def committed(self, append: Awaitable[object]) -> None:
        """`append` (a request's write to the ledger, durable on return) as its span, a child of
        the request's (none in a request the sampler dropped)."""
        if not trace.get_current_span().is_recording():
            await append
            return
        span = self.tracer.start_span("ledger commit", kind=SpanKind.INTERNAL)
        try:
            await append
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            span.end()

    def content(self, text: Mapping[str, object]) -> None:
        """A request's prompt and answer on its span, when the operator turned that on."""
        if self.capture_content and isinstance(traced := context.get_value(REQUEST), Traced):
            traced.attributes["gen_ai.input.messages"] = _json(text.get("request", text.get("prompt")))
            traced.attributes["gen_ai.output.messages"] = _json(text.get("response", text.get("lyrics")))


class SpanCharges:
    """A charge observer (gateway.billing.observers): what the ledger recorded of the request goes
    on its span when it ends. Registered only while tracing is on."""

    async def charged(self, facts: RequestFacts, event: RequestCompleted) -> None:
        if isinstance(traced := context.get_value(REQUEST), Traced) and traced.span.is_recording():
            traced.attributes.update(charged_attributes(event))


def charged_attributes(record: RequestCompleted) -> dict:
    """What the ledger recorded of a request, as attributes (money exact: integers of nano-units)."""
    return {"gen_ai.provider.name": record.provider, "gen_ai.response.model": record.model,
            "gen_ai.usage.input_tokens": record.prompt_tokens, "gen_ai.usage.output_tokens": record.completion_tokens,
            "gateway.cost_inr_nano": record.cost_inr_nano, "gateway.charged_inr_nano": record.charged_inr_nano}


def _described(span: Span, request: web.Request, status: int, facts: RequestFacts, request_id: str) -> dict:
    """The server span's attributes from the request and its log line's facts; names the span."""
    route, model = _route(request), facts.model
    attributes: dict = {"http.request.method": request.method, "http.route": route,
                        "http.response.status_code": status, "gateway.request_id": request_id}
    if operation := OPERATIONS.get(f"{request.method} {route}"):
        attributes["gen_ai.operation.name"] = operation
        span.update_name(f"{operation} {model}" if model else operation)
    if model:
        attributes["gen_ai.request.model"] = model
    if status >= 500:  # a server's 4xx is the client's error, not the span's (HTTP conventions)
        attributes["error.type"] = str(status)
        span.set_status(Status(StatusCode.ERROR))
    return attributes


def _json(value: object) -> str:
    # Only with capture_content, off the usual path; `default=str` so no text can fail a request.
    return json.dumps(value, ensure_ascii=False, default=str)


def _route(request: web.Request) -> str:
    """The route's template (no ids in span names), or the path when no route matched."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else request.path
