"""The Vertex AI adapter: Gemini and Claude models of one Google Cloud project and region.

Models whose upstream id starts with `claude` are Anthropic's (`publishers/anthropic`): the
Messages body without `model` and with `anthropic_version`, sent to `:rawPredict` or
`:streamRawPredict`, answered as Anthropic answers. The others are Google's
(`publishers/google`): the Gemini API's generateContent body and answers. Each side's wire is
the anthropic and google adapters' own; only the URL and the credentials are Vertex's:

    {base}/v1/projects/{project}/locations/{region}/publishers/{publisher}/models/{model}:{action}

`base` is `https://{region}-aiplatform.googleapis.com`, or `https://aiplatform.googleapis.com`
for the `global` region, unless configured. Every request carries an OAuth access token of the
Application Default Credentials (`access`); a 401 drops it so the next request fetches anew.
"""

import aiohttp

from gateway.config import ProviderConfig
from gateway.edge.errors import UpstreamError
from gateway.providers.anthropic import adapter as anthropic
from gateway.providers.anthropic import wire as anthropic_wire
from gateway.providers.base import Allowance, ChatCall, ChatReply, ChatStream
from gateway.providers.google import adapter as google
from gateway.providers.google import chat_request as gemini_request
from gateway.providers.http import Upstream, post_json, read_json, timeout_for
from gateway.providers.vertex.access import GoogleAccess

DEFAULT_REGION = "us-east5"
ANTHROPIC_VERSION = "vertex-2023-10-16"  # Vertex's name for the Messages API it serves, in the body


class VertexGeminiStream(google.GeminiChatStream):
    provider = "vertex"


class VertexClaudeStream(anthropic.AnthropicChatStream):
    provider = "vertex"


def is_claude(upstream_model: str) -> bool:
    """Whether Vertex serves `upstream_model` from Anthropic (else from Google)."""
    return upstream_model.startswith("claude")


def base_url(config: ProviderConfig) -> str:
    """The configured base URL, else the region's host (the global endpoint for `global`)."""
    if config.base_url:
        return config.base_url.rstrip("/")
    region = config.region or DEFAULT_REGION
    return "https://aiplatform.googleapis.com" if region == "global" else f"https://{region}-aiplatform.googleapis.com"


def claude_request(call: ChatCall, stream: bool) -> dict:
    """The Anthropic chat request, as Vertex takes it: the model in the URL, the version in the body."""
    body = anthropic.chat_request(call, stream)
    del body["model"]
    return {**body, "anthropic_version": ANTHROPIC_VERSION}


class VertexProvider:
    """Chat with Vertex AI's Gemini and Claude models (OpenAI chat bodies, translated)."""

    def __init__(self, provider_id: str, config: ProviderConfig, upstream: Upstream) -> None:
        self.id = provider_id  # the configuration's name for it: `[providers.<id>]`
        self._base = base_url(config)
        self._region = config.region or DEFAULT_REGION
        self._project = config.project  # empty: the credentials'
        self._access = GoogleAccess(config.credentials_file)
        self._upstream = upstream.for_provider(config)
        self._timeout = timeout_for(config)

    @staticmethod
    def requires_max_tokens(upstream_model: str) -> bool:
        return is_claude(upstream_model)  # Anthropic's models refuse requests without it

    @staticmethod
    def chat_request(call: ChatCall, stream: bool) -> dict:
        """The request sent for `call`: Claude's Messages body, or Gemini's generateContent body."""
        if is_claude(call.upstream_model):
            return claude_request(call, stream)
        return google.GoogleProvider.chat_request(call, stream)

    @staticmethod
    def chat_allowance(body: dict) -> Allowance:
        """Gemini's reading of the body's limits: the tighter of max_tokens and
        max_completion_tokens in each of `n` answers. Claude's is the same limit in one answer
        (its translation drops `n`); the body does not say which publisher it goes to, so the
        larger of the two stands for both."""
        return gemini_request.allowance(gemini_request.limits(body))

    async def chat(self, call: ChatCall) -> ChatReply:
        if is_claude(call.upstream_model):
            response = await self._post(call, "rawPredict", claude_request(call, False))
            return anthropic.chat_reply(anthropic_wire.checked_message(await read_json(self.id, response)))
        return await google.chat_reply(self.id, call, await self._post(call, "generateContent",
                                                                        self.chat_request(call, False)))

    async def open_chat_stream(self, call: ChatCall) -> ChatStream:
        if is_claude(call.upstream_model):
            return VertexClaudeStream(await self._post(call, "streamRawPredict", claude_request(call, True)))
        response = await self._post(call, "streamGenerateContent?alt=sse", self.chat_request(call, True))
        return await google.opened_stream(VertexGeminiStream, call, response)

    async def _post(self, call: ChatCall, action: str, body: dict) -> aiohttp.ClientResponse:
        """POST `body` to the model's `action` with a current access token; a 401 drops the token."""
        access = await self._access.get()
        url = self._url(call.upstream_model, action, access.project)
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {access.token}"}
        try:
            return await post_json(self._upstream, self.id, url, body, headers, self._timeout)
        except UpstreamError as exc:
            if exc.status == 401:  # revoked or expired early: fetch a new one for the next request
                self._access.forget()
            raise

    def _url(self, upstream_model: str, action: str, credentials_project: str) -> str:
        project = self._project or credentials_project
        if not project:
            raise UpstreamError(502, "vertex has no project: set `project`, or use credentials that name one",
                                reason="connection")
        publisher = "anthropic" if is_claude(upstream_model) else "google"
        return (f"{self._base}/v1/projects/{project}/locations/{self._region}/publishers/{publisher}"
                f"/models/{upstream_model}:{action}")
