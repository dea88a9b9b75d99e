"""The Bedrock adapter: chat through Converse and ConverseStream, embeddings through InvokeModel.

Every model Bedrock serves (Claude, Llama, Mistral, Nova) speaks Converse, so OpenAI chat
bodies are translated once (`converse`) and answers come back through `answers` and `events`;
/v1/responses and /v1/messages reach these models through that same chat translation. The model
id goes in the URL percent-encoded, as AWS's own clients send it, whether a base id, a
cross-region inference profile (`us.`, `eu.`, `apac.`, `global.`) or a profile's ARN; the
signature covers exactly that encoded path.
"""

import time
from urllib.parse import quote

import aiohttp
import yarl

from gateway.config import ProviderConfig
from gateway.jsonio import encode
from gateway.providers.base import Allowance, ChatCall, ChatReply, EmbeddingCall, EmbeddingReply, completion_id
from gateway.providers.bedrock import answers, converse, embeddings
from gateway.providers.bedrock.auth import BedrockAuth
from gateway.providers.bedrock.events import BedrockChatStream
from gateway.providers.http import Upstream, post, read_json, timeout_for
from gateway.providers.openai.adapter import inputs


class BedrockProvider:
    def __init__(self, provider_id: str, config: ProviderConfig, upstream: Upstream) -> None:
        self.id = provider_id  # the configuration's name for it: `[providers.<id>]`
        self._auth = BedrockAuth(config)
        self._base = (config.base_url or f"https://bedrock-runtime.{self._auth.region}.amazonaws.com").rstrip("/")
        self._upstream = upstream.for_provider(config)
        self._timeout = timeout_for(config)

    @staticmethod
    def requires_max_tokens(upstream_model: str) -> bool:
        return "anthropic." in upstream_model  # Claude refuses requests without it, wherever it runs

    @staticmethod
    def chat_request(call: ChatCall, stream: bool) -> dict:
        """The Converse request (the same for ConverseStream, which is its own URL)."""
        return converse.converse_body(call.body)

    @staticmethod
    def chat_allowance(body: dict) -> Allowance:
        return converse.allowance(body)

    async def chat(self, call: ChatCall) -> ChatReply:
        response = await self._post(call.upstream_model, "converse", converse.converse_body(call.body), call.api_key)
        answer = await read_json(self.id, response)
        body, usage = answers.completion(answer, completion_id(call.request_id), call.upstream_model, int(time.time()))
        return ChatReply(body, usage)

    async def open_chat_stream(self, call: ChatCall) -> BedrockChatStream:
        request = converse.converse_body(call.body)
        response = await self._post(call.upstream_model, "converse-stream", request, call.api_key)
        as_json = (request.get("toolConfig") or {}).get("toolChoice") == {"tool": {"name": converse.RESPONSE_TOOL}}
        stream = BedrockChatStream(response, completion_id(call.request_id), call.upstream_model, as_json)
        await stream.start()
        return stream

    async def embed(self, call: EmbeddingCall) -> EmbeddingReply:
        async def invoke(model: str, body: dict) -> tuple[dict, dict[str, str]]:
            response = await self._post(model, "invoke", body, call.api_key)
            return await read_json(self.id, response), dict(response.headers)
        return await embeddings.embed(invoke, call.upstream_model, call.body, inputs(call.body.get("input")))

    async def _post(self, model: str, action: str, body: dict, api_key: str) -> aiohttp.ClientResponse:
        """POST `body` to the model's `action`, signed over the encoded URL and the exact bytes sent."""
        url = f"{self._base}/model/{quote(model, safe='')}/{action}"
        data = encode(body)
        headers = await self._auth.headers(url, data, api_key)
        return await post(self._upstream, self.id, yarl.URL(url, encoded=True), data, headers, self._timeout,
                          refused=answers.refused)
