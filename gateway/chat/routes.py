"""Chat's routes: POST /v1/chat/completions and OpenAI's legacy POST /v1/completions, each whole
or streamed, both paid."""

from aiohttp import web

from gateway.chat import completions, service as chat
from gateway.chat.request import BODY_BYTES, ChatRequest
from gateway.edge.bodies import whole_or_streamed
from gateway.edge.routes import Endpoint, JsonBody

CHAT_BODY = JsonBody(ChatRequest, BODY_BYTES)
COMPLETION_BODY = JsonBody(completions.CompletionRequest, BODY_BYTES)
WHOLE_OR_STREAMED = {"200": ("application/json", "text/event-stream")}


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await whole_or_streamed(request, CHAT_BODY, chat.complete, chat.open_stream)


async def create_completion(request: web.Request) -> web.StreamResponse:
    """OpenAI's legacy text completions, for models of kind completion."""
    return await whole_or_streamed(request, COMPLETION_BODY, completions.complete, completions.open_stream)


ENDPOINTS = (
    Endpoint("POST", chat.ROUTE, chat_completions, "Chat completion, whole or streamed", body=CHAT_BODY,
             paid=True, model_kind="chat", kind_home=True, answers=WHOLE_OR_STREAMED),
    Endpoint("POST", completions.ROUTE, create_completion, "Legacy text completion, whole or streamed",
             body=COMPLETION_BODY, paid=True, model_kind="completion", kind_home=True, answers=WHOLE_OR_STREAMED),
)
