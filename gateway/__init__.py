"""The HTTP gateway: one OpenAI-shaped API in front of several model providers, each request
billed through the event-sourced ledger. It imports the ledger and storage packages; neither imports it.

Each folder below is a family; its __init__ names its modules (tests/test_architecture.py
checks both maps against the files). Imports point down this list, never up: the edge imports no
API family, providers and routing import nothing of billing.

The process
- `app`: create_app, one cleanup context per resource; every endpoint registered from `routes`.
- `routes`: every endpoint, one tuple: each API family's own, the only module naming them all.
- `server`: one process serving until SIGINT/SIGTERM, then draining; `workers`: N processes on
  one port; `cli` (and __main__): the gateway command; `demo`: the gateway with the simulator.
- `config`: the TOML file and its GATEWAY_* overrides; `catalogue/` (and its `catalogue.json`):
  which models exist, who serves them, what they cost, and the price version in force.
- `services`: Services, what every service function uses, and Caller, one authenticated request.
- `redis_client`: Redis kept brief, behind a breaker; `jsonio`: the JSON codecs.

Shared by the API families
- `resolution`: a request's model and the adapter that serves it (400, 501).
- `streaming`: the one billed control flow of a streamed answer (BilledRelay).
- `content`: a request's stored text, kept while it streams and read back.

The HTTP edge
- `edge/`: the route table's types, middleware, intake, bodies, parsing, errors, SSE, connections,
  the 404 index, the typed keys, the OpenAPI document.

The API families, one folder each, with its handlers and endpoints in `routes`
- `chat/` (chat and legacy completions), `messages/` (Anthropic's Messages and count_tokens),
  `responses/` (the Responses API and its stored responses), `embeddings/`, `audio/` (speech,
  transcription), `realtime/`, `models/` (GET /v1/models), `music/` (generation, history, the
  /media download), `dashboard/` (the page and its API), `ledger_api/` (an org's export of its
  events, the signed checkpoints and their key), `webhooks/` (alert endpoints, and their delivery
  from the ledger), `batches/` (batches and the Files API's kept files).

Below the families
- `billing/`: what a request costs, its holds and escrow, whether it is charged, its record.
- `routing/`: the order a model's providers are tried in, their circuits, failover.
- `providers/`: one adapter per wire protocol (OpenAI, Anthropic, Google), what upstreams report.
- `accounts/`: keys, the directory, key policy, rate limits, BYOK keys and their sealing, admin.
- `ops/`: metrics, health, a request's facts, log setup.
- `telemetry/`: OpenTelemetry traces, when an OTLP endpoint is configured.
"""

__version__ = "0.1.0"
