"""The Gemini API route family: ``POST /v1beta/models/{model}:{action}``, dispatched by both.

aiohttp cannot match a literal ":" between two path variables, so one variable holds
"{model}:{action}" and `models_route` splits it. Each kind of model has its own
handler module (`gemini_music`, `gemini_chat`) and is wired in `handler_for`. A
model/action pair without a handler gets Gemini's 404 NOT_FOUND.
"""

from collections.abc import Awaitable, Callable

from aiohttp import web

from simulator.gemini_chat import CHAT_MODELS, generate_content, stream_generate_content
from simulator.gemini_music import MUSIC_MODELS, generate_music
from simulator.gemini_wire import error_response

MODELS_ROUTE = "/v1beta/models/{model_action}"
GENERATE_CONTENT = "generateContent"
STREAM_GENERATE_CONTENT = "streamGenerateContent"

# A handler serves one request for the model named by its second argument.
ModelHandler = Callable[[web.Request, str], Awaitable[web.StreamResponse]]


def handler_for(model: str, action: str) -> ModelHandler | None:
    """The handler of `action` on `model`, None when the simulator does not offer it."""
    if action == GENERATE_CONTENT and model in MUSIC_MODELS:
        return generate_music
    if model in CHAT_MODELS:
        chat_actions = {GENERATE_CONTENT: generate_content, STREAM_GENERATE_CONTENT: stream_generate_content}
        return chat_actions.get(action)
    return None


async def models_route(request: web.Request) -> web.StreamResponse:
    """POST /v1beta/models/{model}:{action} -> the model's handler, or 404 NOT_FOUND."""
    model, _, action = request.match_info["model_action"].partition(":")
    handler = handler_for(model, action)
    if handler is None:
        return error_response(
            404,
            f"models/{model} is not found for API version v1beta, or is not supported for"
            f" {action or 'this method'}. Call ListModels to see the list of available models"
            " and their supported methods.",
        )
    return await handler(request, model)


def add_routes(app: web.Application) -> None:
    """Mount the Gemini model route."""
    app.router.add_post(MODELS_ROUTE, models_route)
