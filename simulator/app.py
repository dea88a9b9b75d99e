"""The simulator's aiohttp application factory."""

from aiohttp import web

from simulator import anthropic_messages, gemini_routes, openai_audio, openai_chat, openai_embeddings
from simulator import anthropic_count_tokens, openai_completions, openai_realtime, openai_responses
from simulator import anthropic_batches, azure_routes, bedrock_routes, files, openai_batches, vertex_routes
from simulator.auth import auth_middleware
from simulator.batch_control import add_batch_control
from simulator.outage import Outage, add_outage, outage_middleware
from simulator.recording import RECORDER_KEY, Recorder, add_control_routes, recording_middleware
from simulator.settings import SETTINGS_KEY, Settings

# Gateway tests send long prompts; aiohttp's 1 MiB default would reject them.
MAX_REQUEST_BYTES = 64 * 1024 * 1024


def create_app(settings: Settings) -> web.Application:
    """A fresh simulator app; all its state (settings, request record) hangs off the app."""
    # Recording is outermost so that requests rejected by auth are recorded too.
    app = web.Application(
        middlewares=[recording_middleware, auth_middleware, outage_middleware], client_max_size=MAX_REQUEST_BYTES
    )
    app[SETTINGS_KEY] = settings
    app[RECORDER_KEY] = Recorder()
    openai_chat.add_routes(app)
    openai_completions.add_routes(app)
    openai_responses.add_routes(app)
    openai_embeddings.add_routes(app)
    openai_audio.add_routes(app)
    openai_realtime.add_routes(app)
    anthropic_messages.add_routes(app)
    anthropic_count_tokens.add_routes(app)
    gemini_routes.add_routes(app)
    bedrock_routes.add_routes(app)
    vertex_routes.add_routes(app)
    azure_routes.add_routes(app)
    add_batch_control(app)  # before the batch APIs: they hang their stores on it
    files.add_routes(app)
    openai_batches.add_routes(app)
    anthropic_batches.add_routes(app)
    add_control_routes(app)
    add_outage(app, Outage.named(settings.outage))
    return app
