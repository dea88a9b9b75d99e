"""Every finding of issue 12 point 5 (and the upload and `dimensions` ones of point 9): bad
input gets a 4xx with the one JSON error body naming the field, never a 500."""

import asyncio
from urllib.parse import quote

import pytest

from tests.support import auth, chat_body

MP3 = b"\xff\xfb\x90\x00" + b"\x00" * 400
BOUNDARY = "fuzzboundary"


def assert_error(response_status: int, body: dict, status: int, param: str | None) -> None:
    assert response_status == status, body
    assert isinstance(body["error"]["message"], str) and body["error"]["type"], body
    assert body["error"]["param"] == param, body


async def post(gateway, org, path: str, body: dict) -> tuple[int, dict]:
    response = await gateway.client.post(path, json=body, headers=auth(org["api_key"]))
    assert response.content_type == "application/json"
    return response.status, await response.json()


async def get(gateway, org, path: str) -> tuple[int, dict]:
    response = await gateway.client.get(path, headers=auth(org["api_key"]))
    assert response.content_type == "application/json"
    return response.status, await response.json()


@pytest.mark.parametrize("log_id", ["log_9223372036854775808", "log_" + "9" * 5000, "log_\u00b2", "log_-1"])
async def test_a_log_id_beyond_64_bits_or_not_ascii_digits_is_a_400(gateway, org, log_id):
    status, body = await get(gateway, org, f"/v1/logs/{log_id}")
    assert_error(status, body, 400, "id")


@pytest.mark.parametrize("kind", ["link", "content"])
@pytest.mark.parametrize("track_id", ["log_99999999999999999999", "log_9223372036854775808", "log_\u00b2",
                                      "log_\u0661", "log_\uff11", "log_1_000", "log_+1", "log_ 1"])
async def test_a_track_log_id_beyond_63_bits_or_not_ascii_digits_is_a_400(gateway, org, kind, track_id):
    """Issue 25 item 4: these were an OverflowError in the ledger and a ValueError from int()."""
    status, body = await get(gateway, org, f"/v1/music/{quote(track_id, safe='')}/{kind}")
    assert_error(status, body, 400, "track_id")


async def test_a_track_log_id_in_range_that_names_nothing_is_a_404(gateway, org):
    status, body = await get(gateway, org, "/v1/music/log_9223372036854775807/link")
    assert_error(status, body, 404, None)


@pytest.mark.parametrize("query, param", [
    ("limit=%C2%B2", "limit"), ("limit=%D9%A1", "limit"), ("limit=" + "1" * 5000, "limit"),
    ("status=%C2%B2", "status"), ("before=log_%C2%B2", "before"), ("before=log_99999999999999999999", "before")])
async def test_log_query_numbers_must_be_ascii_digits_within_bounds(gateway, org, query, param):
    status, body = await get(gateway, org, f"/v1/logs?{query}")
    assert_error(status, body, 400, param)


@pytest.mark.parametrize("path", ["/v1/music?limit=%C2%B2", "/v1/usage?days=%C2%B3"])
async def test_other_query_numbers_are_read_the_same_way(gateway, org, path):
    status, body = await get(gateway, org, path)
    assert_error(status, body, 400, path.split("?")[1].split("=")[0])


async def raw_request(gateway, head: bytes) -> tuple[int, bytes, bytes]:
    """Send bytes no HTTP client would (headers outside ASCII); the status, head and body."""
    reader, writer = await asyncio.open_connection(gateway.server.host, gateway.server.port)
    writer.write(head)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), head.lower(), body


@pytest.mark.parametrize("header", [b"Authorization: Bearer \xff\xfe", b"x-api-key: \xff\xfe\x80"])
async def test_a_key_that_is_not_ascii_is_a_401_before_authentication(gateway, org, header):
    status, head, body = await raw_request(
        gateway, b"GET /v1/logs HTTP/1.1\r\nHost: x\r\n" + header + b"\r\nConnection: close\r\n\r\n")
    assert status == 401 and b"content-type: application/json" in head, body


async def test_an_idempotency_key_that_is_not_ascii_is_a_400_naming_it(gateway, org):
    body = b'{"model": "tune-3-clip-preview", "prompt": "a tune"}'
    key = org["api_key"].encode()
    status, _head, answer = await raw_request(gateway, (
        b"POST /v1/music HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key + b"\r\nIdempotency-Key: \xff\xfe"
        b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() +
        b"\r\nConnection: close\r\n\r\n" + body))
    assert status == 400 and b'"param":"Idempotency-Key"' in answer, answer


async def test_an_idempotent_music_body_with_an_integer_beyond_64_bits_is_not_a_500(gateway, org):
    """Found by the fuzz suite: the body is decoded with its big integer, and hashing it for the
    Idempotency-Key must not fail on it."""
    body = b'{"model": "tune-3-clip-preview", "prompt": "a tune", "extra": [-532496047885656839421952]}'
    response = await gateway.client.post("/v1/music", data=body, headers={
        **auth(org["api_key"]), "Content-Type": "application/json", "Idempotency-Key": "big-int"})
    assert response.status < 500, await response.text()


@pytest.mark.parametrize("extra, param", [
    ({"stop_sequences": 5}, "stop_sequences"), ({"stop_sequences": [5]}, "stop_sequences"),
    ({"system": [{"type": "text", "text": 1}]}, "system"), ({"system": 7}, "system"),
    ({"tools": [{"name": 5}]}, "tools"), ({"tool_choice": "auto"}, "tool_choice"),
    ({"metadata": {"user_id": 5}}, "metadata"), ({"temperature": "hot"}, "temperature"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": 5}}]}]},
     "messages")])
async def test_messages_to_a_non_anthropic_model_refuse_wrong_types(gateway, org, extra, param):
    body = {"model": "gpt-4o-mini", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}], **extra}
    status, answer = await post(gateway, org, "/v1/messages", body)
    assert_error(status, answer, 400, param)


GEMINI, CLAUDE = "gemini-2.5-flash", "claude-haiku-4-5"


@pytest.mark.parametrize("model, extra, param", [
    (GEMINI, {"stop": 5}, "stop"), (GEMINI, {"stop": [1, 2]}, "stop"),
    (GEMINI, {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": 5}]}, "messages"),
    (GEMINI, {"messages": [{"role": "assistant", "tool_calls": [{"function": 5}]}]}, "messages"),
    (GEMINI, {"messages": [{"role": "tool", "tool_call_id": [1], "content": "x"}]}, "messages"),
    (GEMINI, {"reasoning_effort": ["high"]}, "reasoning_effort"),
    (GEMINI, {"response_format": {"type": "json_schema", "json_schema": "x"}}, "response_format"),
    (GEMINI, {"tools": [{"type": "function", "function": 5}]}, "tools"),
    (GEMINI, {"tool_choice": {"function": 5}}, "tool_choice"),
    (CLAUDE, {"max_tokens": 5, "messages": [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": 5}}]}]}, "messages"),
    (CLAUDE, {"max_tokens": 5, "stop": 5}, "stop"), (CLAUDE, {"max_tokens": 5, "user": ["u"]}, "user"),
    (CLAUDE, {"max_tokens": 5, "messages": [{"role": "user", "content": [5]}]}, "messages"),
    (CLAUDE, {"max_tokens": 5, "messages": [{"role": "narrator", "content": "x"}]}, "messages")])
async def test_chat_to_translated_providers_refuses_wrong_types(gateway, org, model, extra, param):
    status, answer = await post(gateway, org, "/v1/chat/completions", chat_body(model=model, **extra))
    assert_error(status, answer, 400, param)


@pytest.mark.parametrize("model", [GEMINI, CLAUDE, "gpt-4o-mini"])
@pytest.mark.parametrize("extra, param", [
    ({"reasoning": {"effort": ["low"]}}, "reasoning"), ({"reasoning": {"effort": {"x": 1}}}, "reasoning"),
    ({"reasoning": ["low"]}, "reasoning"), ({"reasoning": {"summary": 5}}, "reasoning"),
    ({"text": {"format": {"type": "json_schema", "name": ["x"], "schema": {}}}}, "text"),
    ({"text": {"format": {"type": "json_schema", "name": "x", "schema": "s"}}}, "text"),
    ({"text": {"format": ["json_object"]}}, "text"), ({"text": {"format": {"type": 5}}}, "text"),
    ({"tools": [{"type": "function", "name": "f", "parameters": "p"}]}, "tools"),
    ({"tools": [{"type": "function", "name": "f", "description": ["d"]}]}, "tools"),
    ({"tools": [{"type": "function", "name": "f", "strict": "yes"}]}, "tools"),
    ({"tools": [{"type": ["function"], "name": "f"}]}, "tools"),
    ({"tool_choice": {"type": "function", "name": ["f"]}}, "tool_choice"), ({"tool_choice": 5}, "tool_choice")])
async def test_responses_nested_fields_of_the_wrong_type_are_a_400_naming_the_field(gateway, org, model, extra,
                                                                                     param):
    """Issue 25 item 4: reasoning.effort as a list reached the Gemini translation untyped (a 500)."""
    status, answer = await post(gateway, org, "/v1/responses", {"model": model, "input": "hi", **extra})
    assert_error(status, answer, 400, param)


@pytest.mark.parametrize("model, dimensions, status", [
    ("text-embedding-3-small", 1537, 400), ("text-embedding-3-small", 2**63, 400),
    ("text-embedding-3-large", 3073, 400), ("text-embedding-3-small", 0, 400),
    ("text-embedding-3-small", 1536, 200), ("text-embedding-3-large", 3072, 200)])
async def test_dimensions_are_bounded_by_the_models_output_size(gateway, org, model, dimensions, status):
    code, body = await post(gateway, org, "/v1/embeddings", {"model": model, "input": "x", "dimensions": dimensions})
    if status == 200:
        assert code == 200 and len(body["data"][0]["embedding"]) == dimensions
    else:
        assert_error(code, body, 400, "dimensions")


def form(*parts: bytes, close: bool = True) -> bytes:
    body = b"".join(f"--{BOUNDARY}\r\n".encode() + part + b"\r\n" for part in parts)
    return body + (f"--{BOUNDARY}--\r\n".encode() if close else b"")


MODEL_PART = b'Content-Disposition: form-data; name="model"\r\n\r\nwhisper-1'
FILE_PART = b'Content-Disposition: form-data; name="file"; filename="a.mp3"\r\nContent-Type: audio/mpeg\r\n\r\n' + MP3


@pytest.mark.parametrize("body", [
    form(b'Content-Disposition: form-data; name="\x1b\xf1\x9c\xa5\x82"\r\n\r\nx', MODEL_PART, FILE_PART),
    form(MODEL_PART, b"Content-Disposition form-data no colon\r\n\r\nx", FILE_PART),
    form(FILE_PART, b'Content-Disposition: form-data; name="\xff"\r\n\r\nx', MODEL_PART)],
    ids=["bad-header-first", "no-colon", "bad-header-after-the-file"])
async def test_a_part_with_a_malformed_header_is_a_400(gateway, org, body):
    response = await gateway.client.post(
        "/v1/audio/transcriptions", data=body,
        headers={**auth(org["api_key"]), "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"})
    assert response.status == 400 and response.content_type == "application/json", await response.text()
    assert (await response.json())["error"]["param"] == "file"


@pytest.mark.parametrize("body", [form(MODEL_PART, FILE_PART, close=False),
                                  form(MODEL_PART, FILE_PART)[:-60]], ids=["no-closing-boundary", "cut-in-the-file"])
async def test_a_truncated_upload_is_a_400_not_a_502(gateway, org, body):
    response = await gateway.client.post(
        "/v1/audio/transcriptions", data=body,
        headers={**auth(org["api_key"]), "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"})
    answer = await response.json()
    assert response.status == 400 and answer["error"]["param"] == "file", answer
    assert answer["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("path", ["/v1/logs/%ff%fe", "/v1/logs/req_%00", "/v1/music/%ff/link",
                                  "/v1/music/%ff/content", "/v1/keys/%ff", "/dashboard/static/%ff.js"])
async def test_ids_in_paths_that_are_not_text_are_a_4xx(gateway, org, path):
    from yarl import URL

    method = "DELETE" if path.startswith("/v1/keys") else "GET"
    response = await gateway.client.request(method, URL(path, encoded=True), headers=auth(org["api_key"]))
    assert 400 <= response.status < 500 and response.content_type == "application/json", await response.text()


@pytest.mark.parametrize("path", ["/v1/logs/req_%00x", "/v1/music/trk%00/link", "/v1/logs?model=a%00b"])
async def test_a_nul_in_an_id_is_a_4xx_on_postgresql_too(make_pg_gateway, config, path):
    from yarl import URL

    gateway = await make_pg_gateway(config)
    org = await gateway.new_org("10")
    response = await gateway.client.get(URL(path, encoded=True), headers=auth(org["api_key"]))
    assert 400 <= response.status < 500 and response.content_type == "application/json", await response.text()


async def test_a_key_name_with_a_nul_is_a_400_on_postgresql_too(make_pg_gateway, config):
    gateway = await make_pg_gateway(config)
    org = await gateway.new_org("10")
    response = await gateway.client.post("/v1/keys", json={"name": "a\u0000b"}, headers=auth(org["api_key"]))
    assert response.status == 400 and (await response.json())["error"]["param"] == "name"


@pytest.mark.parametrize("query", ["expires=%C2%B2&signature=abc", "expires=" + "9" * 5000 + "&signature=abc",
                                   "expires=99999999999&signature=%C3%A9t%C3%A9"])
async def test_a_signed_link_with_odd_expiry_or_signature_is_a_403(gateway, query):
    response = await gateway.client.get(f"/media/org_x/track.mp3?{query}")
    assert response.status == 403 and response.content_type == "application/json", await response.text()
