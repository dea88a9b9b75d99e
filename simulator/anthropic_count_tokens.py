"""POST /v1/messages/count_tokens: Anthropic's count of a Messages request's input tokens.

The body is a Messages request without `max_tokens` or `stream` (the real API refuses them
here, as it refuses any unknown field). The count is the one a Messages answer to the same
request reports in total (`simulator.anthropic_wire`'s token accounting), so tests can predict
it. Directives are read as on /v1/messages; latency, hang and status apply, the rest are ignored.
"""

from aiohttp import web

from simulator import anthropic_wire as wire
from simulator.anthropic_messages import MESSAGES_PATH, parse, simulated_error
from simulator.behaviour import abandoned, delay_headers
from simulator.plan import make_plan
from simulator.recording import RECORD_KEY
from simulator.settings import SETTINGS_KEY

COUNT_TOKENS_PATH = MESSAGES_PATH + "/count_tokens"
REFUSED = ("max_tokens", "stream")  # Messages fields that count_tokens does not take


async def count_tokens(request: web.Request) -> web.StreamResponse:
    """Answer `{"input_tokens": N}` for the request's system prompt and messages."""
    if not request.headers.get("anthropic-version"):
        return wire.error_response(400, "anthropic-version: header is required")
    body = request[RECORD_KEY].body
    if isinstance(body, dict) and (field := next((f for f in REFUSED if f in body), None)):
        return wire.error_response(400, f"{field}: Extra inputs are not permitted")
    try:
        parsed, found = parse({**body, "max_tokens": 1} if isinstance(body, dict) else body)
    except wire.BadRequest as exc:
        return wire.error_response(400, str(exc))
    plan = make_plan(request.app[SETTINGS_KEY], found, None)
    if not await delay_headers(request, plan):
        return abandoned(request, "disconnected")
    if plan.status is not None:
        return simulated_error(plan.status)
    return wire.json_response({"input_tokens": wire.prompt_tokens(parsed)})


def add_routes(app: web.Application) -> None:
    app.router.add_post(COUNT_TOKENS_PATH, count_tokens)
