"""The batch adapters' translations, without a provider: each line as the single route sends it,
each result line read back as the single route reads an answer (its usage too), errors and lines
that never ran, malformed lines; which providers offer a batch API; and the JSON Lines plumbing
(a long line, a producer's own failure) against a bare server."""

import asyncio

import aiohttp
import orjson
import pytest
from aiohttp import web

from gateway.config import ProviderConfig
from gateway.edge.errors import ApiError, UpstreamError
from gateway.providers import anthropic, build, openai
from gateway.providers.anthropic import batches as claude
from gateway.providers.anthropic.adapter import chat_request
from gateway.providers.base import BatchLine, ChatCall
from gateway.providers.http import Upstream
from gateway.providers.openai import batches as oa
from gateway.providers.http import get
from gateway.providers.openai.jsonl import records, uploaded
from gateway.providers.usage import Usage

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "stream": True,
        "stream_options": {"include_usage": True}, "max_tokens": 5}
CLAUDE = {"model": "claude-haiku-4-5", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}],
          "stream": True}


def line(body: dict, custom_id: str = "line-1", model: str = "up-model") -> BatchLine:
    return BatchLine(custom_id, model, body)


# -- openai: lines ----------------------------------------------------------------------------------

def test_an_openai_chat_line_is_the_single_request_unstreamed_for_the_upstream_model():
    assert oa.line_body("/v1/chat/completions", line(CHAT)) == {
        "model": "up-model", "messages": CHAT["messages"], "max_tokens": 5}
    assert oa.line_body("/v1/completions", line({"model": "m", "prompt": "x", "stream": False})) == {
        "model": "up-model", "prompt": "x"}


def test_an_openai_embeddings_line_asks_for_floats_and_a_responses_line_is_not_streamed():
    assert oa.line_body("/v1/embeddings", line({"model": "m", "input": ["a"], "encoding_format": "base64"})) == {
        "model": "up-model", "input": ["a"], "encoding_format": "float"}
    assert oa.line_body("/v1/responses", line({"model": "m", "input": "a", "stream": True})) == {
        "model": "up-model", "input": "a"}


def test_an_uploaded_line_names_its_id_method_route_and_body():
    sent = orjson.loads(oa.input_line("/v1/chat/completions", line(CHAT, "b_1-2")))
    assert sent == {"custom_id": "b_1-2", "method": "POST", "url": "/v1/chat/completions",
                    "body": oa.line_body("/v1/chat/completions", line(CHAT))}


def test_openai_batches_take_the_four_routes_only():
    assert all(map(oa.OpenAIBatches.batchable, ("/v1/chat/completions", "/v1/embeddings", "/v1/responses",
                                                 "/v1/completions")))
    assert not oa.OpenAIBatches.batchable("/v1/messages")


# -- openai: results --------------------------------------------------------------------------------

def answered(body: dict, status: int = 200, custom_id: str = "line-1") -> dict:
    return {"id": "batch_req_1", "custom_id": custom_id, "response": {"status_code": status, "body": body},
            "error": None}


def test_an_openai_chat_result_is_the_answer_with_its_usage_and_tier():
    body = {"id": "c", "object": "chat.completion", "service_tier": "flex",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "yo"}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 2}}}
    result = oa.result_of("/v1/chat/completions", answered(body))
    assert (result.custom_id, result.status, result.outcome) == ("line-1", 200, "succeeded")
    assert result.reply.body == body and result.reply.usage == Usage(7, 3, 2, service_tier="flex")


def test_openai_completions_responses_and_embeddings_results_read_usage_as_their_routes_do():
    text = {"choices": [{"text": "x", "index": 0}], "usage": {"prompt_tokens": 4, "completion_tokens": 1}}
    assert oa.result_of("/v1/completions", answered(text)).reply.usage == Usage(4, 1)
    response = {"id": "resp_1", "output": [], "usage": {"input_tokens": 5, "output_tokens": 6,
                                                         "input_tokens_details": {"cached_tokens": 1}}}
    assert oa.result_of("/v1/responses", answered(response)).reply.usage == Usage(5, 6, 1)
    vectors = {"object": "list", "data": [{"index": 0, "embedding": [0.5, 0.25]}], "usage": {"prompt_tokens": 3}}
    result = oa.result_of("/v1/embeddings", answered(vectors))
    assert result.reply.body == vectors and result.reply.usage == Usage(3)


def test_an_openai_error_line_carries_the_status_and_the_providers_message():
    error = {"error": {"message": "bad model", "type": "invalid_request_error"}}
    result = oa.result_of("/v1/chat/completions", answered(error, 400))
    assert (result.reply, result.status, result.outcome, result.message) == (None, 400, "errored", "bad model")
    bare = {"custom_id": "line-2", "response": None, "error": {"code": "server_error", "message": "oops"}}
    assert oa.result_of("/v1/chat/completions", bare).status == 502


def test_openai_lines_that_never_ran_are_expired_or_canceled_with_no_status():
    for code, outcome in (("batch_expired", "expired"), ("batch_cancelled", "canceled")):
        record = {"custom_id": "x", "response": None, "error": {"code": code, "message": "not run"}}
        result = oa.result_of("/v1/embeddings", record)
        assert (result.status, result.outcome, result.message) == (0, outcome, "not run")


def test_a_malformed_openai_answer_is_an_errored_502_line_and_a_line_without_an_id_raises():
    broken = answered({"choices": "nope"})
    assert (oa.result_of("/v1/chat/completions", broken).status,
            oa.result_of("/v1/chat/completions", broken).outcome) == (502, "errored")
    bad_usage = answered({"choices": [], "usage": {"prompt_tokens": -1}})
    assert oa.result_of("/v1/chat/completions", bad_usage).status == 502
    assert oa.result_of("/v1/embeddings", answered("text")).status == 502  # type: ignore[arg-type]
    with pytest.raises(UpstreamError) as raised:
        oa.result_of("/v1/chat/completions", {"response": {"status_code": 200, "body": {}}})
    assert raised.value.status == 502


def test_an_openai_batch_has_ended_once_its_results_are_final():
    ended = {status: oa.upstream_batch(oa.OpenAIBatch("b", status)).ended for status in (
        "validating", "in_progress", "finalizing", "cancelling", "completed", "failed", "expired", "cancelled")}
    assert [status for status, done in ended.items() if done] == ["completed", "failed", "expired", "cancelled"]


# -- anthropic --------------------------------------------------------------------------------------

def test_a_messages_line_is_the_native_body_for_the_upstream_model_and_a_chat_line_is_translated():
    assert claude.params_of("/v1/messages", line(CLAUDE)) == {
        "model": "up-model", "max_tokens": 9, "messages": CLAUDE["messages"]}  # stream dropped
    chat = {**CHAT, "messages": [{"role": "system", "content": "Be brief."}, *CHAT["messages"]]}
    assert claude.params_of("/v1/chat/completions", line(chat)) == chat_request(
        ChatCall("line-1", "up-model", chat), False)
    assert claude.params_of("/v1/chat/completions", line(chat))["system"] == "Be brief."


async def test_the_requests_body_is_one_json_object_made_line_by_line():
    async def lines():
        for number in range(3):
            yield line(CLAUDE, f"c{number}")
    chunks = [chunk async for chunk in claude.requests_body(lines(), "/v1/messages")]
    assert len(chunks) == 5
    sent = orjson.loads(b"".join(chunks))
    assert [request["custom_id"] for request in sent["requests"]] == ["c0", "c1", "c2"]
    assert sent["requests"][0]["params"]["model"] == "up-model"
    empty = b"".join([chunk async for chunk in claude.requests_body(_none(), "/v1/messages")])
    assert orjson.loads(empty) == {"requests": []}


async def _none():
    return
    yield


MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5-20251001",
           "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",
           "usage": {"input_tokens": 10, "output_tokens": 4, "cache_read_input_tokens": 2,
                     "cache_creation_input_tokens": 3}}


def test_a_succeeded_messages_line_is_the_message_with_the_native_usage():
    result = claude.result_of("/v1/messages", {"custom_id": "c", "result": {"type": "succeeded", "message": MESSAGE}})
    assert result.reply.body == MESSAGE and result.reply.usage == Usage(15, 4, 2, 3)


def test_a_succeeded_chat_line_is_a_chat_completion():
    result = claude.result_of("/v1/chat/completions",
                              {"custom_id": "c", "result": {"type": "succeeded", "message": MESSAGE}})
    body = result.reply.body
    assert body["object"] == "chat.completion" and body["choices"][0]["message"]["content"] == "hello"
    assert body["usage"]["prompt_tokens"] == 15 and result.reply.usage == Usage(15, 4, 2, 3)


@pytest.mark.parametrize("kind,status", [("invalid_request_error", 400), ("authentication_error", 401),
                                         ("permission_error", 403), ("not_found_error", 404),
                                         ("request_too_large", 413), ("rate_limit_error", 429),
                                         ("api_error", 500), ("overloaded_error", 529), ("strange", 502)])
def test_an_errored_anthropic_line_has_the_status_of_its_error_type(kind, status):
    error = {"type": "error", "error": {"type": kind, "message": "why"}}
    result = claude.result_of("/v1/messages", {"custom_id": "c", "result": {"type": "errored", "error": error}})
    assert (result.reply, result.status, result.outcome, result.message) == (None, status, "errored", f"{kind}: why")


def test_anthropic_lines_that_never_ran_and_malformed_ones():
    for kind in ("canceled", "expired"):
        result = claude.result_of("/v1/messages", {"custom_id": "c", "result": {"type": kind}})
        assert (result.status, result.outcome) == (0, kind)
    broken = {"custom_id": "c", "result": {"type": "succeeded", "message": {"content": "no"}}}
    assert (claude.result_of("/v1/messages", broken).status, claude.result_of("/v1/messages", broken).outcome) == (
        502, "errored")
    with pytest.raises(UpstreamError):
        claude.result_of("/v1/messages", {"result": {"type": "succeeded"}})


def test_a_message_batch_has_ended_when_anthropic_says_so_and_its_creation_time_is_read():
    batch = claude.MessageBatch("msgbatch_1", "ended", "2024-08-20T18:37:24.100435Z",
                                claude.RequestCounts(1, 2, 3, 4, 5))
    assert claude.upstream_batch(batch).ended and not claude.upstream_batch(
        claude.MessageBatch("x", "in_progress")).ended
    assert claude.created_us(batch) == 1724179044100435 and batch.request_counts.total == 15
    with pytest.raises(UpstreamError):
        claude.created_us(claude.MessageBatch("x", "ended", "yesterday"))


# -- who offers a batch API -------------------------------------------------------------------------

def test_the_batch_api_is_offered_where_batch_api_is_on():
    upstream = Upstream(None, lambda *_: None)  # type: ignore[arg-type]  # never called
    oai = ProviderConfig(protocol="openai", base_url="http://x/v1")
    assert openai.offer("openai", oai, upstream).batch is not None
    assert openai.offer("groq", oai, upstream).batch is None
    assert openai.offer("groq", ProviderConfig(protocol="openai", base_url="http://x", batch_api=True),
                        upstream).batch is not None
    anth = ProviderConfig(protocol="anthropic", base_url="http://x")
    assert anthropic.offer("anthropic", anth, upstream).batch is not None
    assert anthropic.offer("anthropic", ProviderConfig(protocol="anthropic", base_url="http://x", batch_api=False),
                           upstream).batch is None
    assert set(build({"openai": oai, "anthropic": anth, "groq": oai}, upstream).batch) == {"openai", "anthropic"}


# -- the JSON Lines plumbing ------------------------------------------------------------------------

@pytest.fixture
async def bare(aiohttp_server):
    """A server whose /lines sends long JSON Lines slowly and whose /upload reads what it is sent."""
    async def lines(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for number in range(3):
            record = orjson.dumps({"n": number, "pad": "x" * 300_000}) + b"\n"
            for start in range(0, len(record), 65_536):
                await response.write(record[start:start + 65_536])
                await asyncio.sleep(0)
        await response.write(b"\n")
        return response

    async def upload(request: web.Request) -> web.Response:
        return web.json_response({"bytes": len(await request.read())})

    app = web.Application()
    app.router.add_get("/lines", lines)
    app.router.add_post("/upload", upload)
    server = await aiohttp_server(app)
    async with aiohttp.ClientSession() as session:
        yield str(server.make_url("")).rstrip("/"), Upstream(session, lambda *_: None)


async def test_lines_longer_than_aiohttps_default_limit_are_read_one_by_one(bare):
    url, upstream = bare
    response = await get(upstream, "p", f"{url}/lines", {}, aiohttp.ClientTimeout(sock_read=5))
    assert [record["n"] async for record in records("p", response)] == [0, 1, 2]


async def test_a_missing_page_is_the_providers_error(bare):
    url, upstream = bare
    with pytest.raises(UpstreamError) as raised:
        await get(upstream, "p", f"{url}/nothing", {}, aiohttp.ClientTimeout(sock_read=5))
    assert raised.value.status == 404


async def test_an_upload_whose_producer_fails_raises_the_producers_error_not_a_connection_failure(bare):
    url, upstream = bare
    from gateway.providers.http import post

    async def chunks():
        yield b"x" * 1000
        raise ApiError(400, "line 3 cannot be translated")

    with pytest.raises(ApiError, match="line 3"):
        await uploaded(lambda body: post(upstream, "p", f"{url}/upload", body, {}, aiohttp.ClientTimeout(sock_read=5)),
                       chunks())
