"""The HTTP gateway: one OpenAI-shaped API in front of several model providers, each request
billed through the event-sourced ledger.

It imports `ledger` and `storage`; neither imports it. Its modules, by what they hold:

App and server
- `app`: create_app, one cleanup context per resource (ledger, upstream, Redis, storage, services).
- `state`: every typed key the app and a request carry (AppKey, RequestKey), and Ledger.
- `services`: Services, what every service function uses, and Caller, one authenticated request.
- `config`: the TOML file and its GATEWAY_* overrides, section by section.
- `catalogue` (and `catalogue.json`): which models exist, who serves them, what they cost.
- `server`: one process serving until SIGINT/SIGTERM, then draining; `workers`: N processes on
  one port; `connections`: header, body and keep-alive timeouts on every connection.
- `cli` (and `__main__`): the `gateway` command; `demo`: the gateway with the simulator upstream.

Request edge
- `middleware`: the request id, the canonical log line, authentication, JSON errors.
- `intake`: 402 before a paid route's body; `body_budget`: the body bytes a process holds at once.
- `bodies`: a body read within its limit and decoded into its type; JSON answers.
- `edge`: numbers in queries and paths and header values, each read one way everywhere.
- `errors`: the error bodies (ApiError, UpstreamError), OpenAI's shape and Anthropic's on
  /v1/messages; `jsonio`: the JSON codecs.
- `routes_index`: an unknown route's 404, naming the nearest real route.
- `limits`: per-key rate limits in Redis; `redis_client`: Redis kept brief, behind a breaker.

Auth and keys
- `keys`: API keys made, recognised, stored as digests.
- `provider_keys`: organizations' own provider keys (BYOK), sealed at rest by `sealing`.
- `redaction`: provider keys removed from upstream text by value.

Billing
- `billing/`: `pricing` (what a request costs) and `charging` (whether it is charged; recording it).
- `resolution`: a request's model and the adapter that serves it (400, 501), for every route.

Routes, by API
- `handlers`: the core API's handlers and the app's route table (music's and the dashboard's added).
- `chat` (`chat_request`), `messages` (`messages_request`, `messages_wire`): chat completions and
  Anthropic's Messages; `relay`: the one billed control flow of a streamed answer; `sse`: SSE.
- `responses/`: the Responses API (native for OpenAI, translated through chat for the others),
  its stored responses and its routes.
- `completions`: legacy text completions; `count_tokens`: Anthropic's token counting.
- `models_route`: the catalogue as GET /v1/models and /v1/models/{id} answer it (OpenAI's
  fields, Anthropic's for its client).
- `embeddings` (`float32`), `audio` (speech), `transcription` (`upload`: multipart streamed on),
  `realtime` (the WebSocket relay, GA and beta).
- `openapi`: GET /openapi.json, built from the handlers' types.

Providers
- `providers/`: one adapter per wire protocol (OpenAI, Anthropic, Google), the capability
  registry, the shapes answers are checked against, the shared HTTP plumbing.

Music
- `music/`: generation, request parsing, history, credit holds, Idempotency-Key, signed links,
  the /media download, and its routes.

Dashboard
- `dashboard/`: the page and its API (usage, the request log, the organization's keys), its routes.

Ledger glue
- `directory`: the in-memory view of keys and balances that auth and the credit check read,
  following the ledger.
- `admin`: operator actions (organizations, keys, credits, limits) appended as ledger events.

Ops
- `metrics`: Prometheus at GET /metrics; `health`: GET /, real checks of the dependencies.
- `facts`: what a request turned out to be, for its log line and its metrics.
- `log_setup`: structlog and the standard library's loggers as redacted JSON lines on stderr.
"""

__version__ = "0.1.0"
