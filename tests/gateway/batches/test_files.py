"""The Files API (/v1/files) through the official openai SDK and raw HTTP: a real gateway, its
files on local disk or in the S3 bucket (moto), the ledger recording each file and its deletion,
and the real sweeper process expiring them."""

import asyncio
import io
import json
import tracemalloc
from pathlib import Path

import aiohttp
import msgspec
import pytest

from gateway.batches import files as kept
from gateway.edge.state import SERVICES
from ledger.events import FileDeleted, FileStored
from tests.support import auth
from tests.sweeper.sweeper_helpers import run_sweeper, sweeper_toml

openai = pytest.importorskip("openai")

LINES = b"".join(json.dumps({"custom_id": f"r{n}", "method": "POST", "url": "/v1/chat/completions",
                             "body": {"model": "gpt-4o-mini", "messages": []}}).encode() + b"\n" for n in range(3))
DAY_S = 86_400


def sdk(gateway, org) -> "openai.AsyncOpenAI":
    return openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=org["api_key"], max_retries=0)


@pytest.fixture(params=["local", "s3"])
async def stored(request, make_gateway, config):
    """A gateway keeping files on local disk (beside its SQLite ledger) or in the bucket."""
    if request.param == "local":
        return await make_gateway(config)
    return await make_gateway(request.getfixturevalue("s3_config"))


async def events_of(gateway, kind: type) -> list:
    return [r.event for r in await gateway.events() if isinstance(r.event, kind)]


async def test_upload_retrieve_list_content_delete_with_the_sdk(stored):
    org = await stored.new_org()
    client = sdk(stored, org)
    created = await client.files.create(file=("requests.jsonl", io.BytesIO(LINES)), purpose="batch")
    assert (created.object, created.bytes, created.filename, created.purpose, created.status) == (
        "file", len(LINES), "requests.jsonl", "batch", "processed")
    assert created.id.startswith("file-") and created.expires_at == created.created_at + 30 * DAY_S
    assert (await client.files.retrieve(created.id)).id == created.id
    assert [f.id for f in (await client.files.list()).data] == [created.id]
    assert (await client.files.content(created.id)).content == LINES
    [event] = await events_of(stored, FileStored)
    kept_in = stored.server.app[SERVICES].files
    assert (event.file_id, event.bytes, event.lines, event.storage) == (created.id, len(LINES), 3, kept_in.kind)
    assert await kept_in.exists(event.object_key)

    deleted = await client.files.delete(created.id)
    assert (deleted.id, deleted.deleted) == (created.id, True)
    assert not await kept_in.exists(event.object_key)
    assert [e.expired for e in await events_of(stored, FileDeleted)] == [False]
    with pytest.raises(openai.APIStatusError) as gone:
        await client.files.content(created.id)
    assert gone.value.status_code == 410 and "deleted" in gone.value.body["message"]
    assert (await client.files.list()).data == []
    with pytest.raises(openai.NotFoundError):
        await client.files.delete(created.id)


async def test_local_files_live_beside_the_sqlite_ledger(gateway, org, tmp_path):
    created = await sdk(gateway, org).files.create(file=("in.jsonl", LINES), purpose="batch")
    assert (tmp_path / "files" / org["org_id"] / created.id).read_bytes() == LINES


async def test_files_in_the_bucket_are_under_files_org_file(hosted, hosted_org, s3_client, s3_bucket):
    created = await sdk(hosted, hosted_org).files.create(file=("in.jsonl", LINES), purpose="batch")
    obj = await s3_client.get_object(Bucket=s3_bucket, Key=f"files/{hosted_org['org_id']}/{created.id}")
    assert await obj["Body"].read() == LINES


async def test_another_orgs_file_is_404_everywhere(gateway, org):
    other = await gateway.new_org()
    created = await sdk(gateway, org).files.create(file=("in.jsonl", LINES), purpose="batch")
    stranger = sdk(gateway, other)
    for call in (stranger.files.retrieve, stranger.files.content, stranger.files.delete):
        with pytest.raises(openai.NotFoundError):
            await call(created.id)
    assert (await stranger.files.list()).data == []
    with pytest.raises(openai.NotFoundError):
        await stranger.files.retrieve("file-unknown")
    assert (await sdk(gateway, org).files.content(created.id)).content == LINES


async def test_every_files_route_needs_a_key(gateway, org):
    created = await sdk(gateway, org).files.create(file=("in.jsonl", LINES), purpose="batch")
    one = f"/v1/files/{created.id}"
    for method, path in (("GET", "/v1/files"), ("GET", one), ("DELETE", one), ("GET", one + "/content"),
                         ("POST", "/v1/files")):
        response = await gateway.client.request(method, path)
        assert response.status == 401 and "error" in await response.json(), (method, path)


def form(body: bytes = LINES, **fields: str) -> aiohttp.FormData:
    data = aiohttp.FormData()
    for name, value in fields.items():
        data.add_field(name, value)
    data.add_field("file", body, filename="in.jsonl", content_type="application/jsonl")
    return data


async def post_form(gateway, org, data) -> tuple[int, dict]:
    response = await gateway.client.post("/v1/files", data=data, headers=auth(org["api_key"]))
    return response.status, await response.json()


@pytest.mark.parametrize(("fields", "param"), [
    ({"purpose": "fine-tune"}, "purpose"), ({}, "purpose"),
    ({"purpose": "batch", "expires_after[anchor]": "created_at", "expires_after[seconds]": "3599"},
     "expires_after[seconds]"),
    ({"purpose": "batch", "expires_after[anchor]": "created_at", "expires_after[seconds]": "2592001"},
     "expires_after[seconds]"),
    ({"purpose": "batch", "expires_after[anchor]": "last_active_at", "expires_after[seconds]": "3600"},
     "expires_after[anchor]"),
])
async def test_bad_fields_are_400_naming_them(gateway, org, fields, param):
    status, body = await post_form(gateway, org, form(**fields))
    assert (status, body["error"]["param"]) == (400, param), body
    assert await events_of(gateway, FileStored) == []


async def test_expires_after_sets_the_expiry(gateway, org):
    created = await sdk(gateway, org).files.create(
        file=("in.jsonl", LINES), purpose="batch", expires_after={"anchor": "created_at", "seconds": 3600})
    assert created.expires_at - created.created_at in (3600, 3601)  # whole seconds of microsecond instants


async def test_an_empty_file_and_no_file_are_400(gateway, org):
    status, body = await post_form(gateway, org, form(b"", purpose="batch"))
    assert (status, body["error"]["param"]) == (400, "file") and "empty" in body["error"]["message"]
    data = aiohttp.FormData()
    data.add_field("purpose", "batch")
    data.add_field("other", "x")  # a multipart form without the file part
    status, body = await post_form(gateway, org, data)
    assert (status, body["error"]["param"]) == (400, "file")


async def test_a_batch_input_of_more_than_50000_lines_is_400(gateway, org):
    status, body = await post_form(gateway, org, form(b"{}\n" * 50_001, purpose="batch"))
    assert (status, body["error"]["param"]) == (400, "file") and "50000" in body["error"]["message"]
    created = await sdk(gateway, org).files.create(file=("in.jsonl", b"{}\n" * 50_000), purpose="batch")
    assert created.bytes == 150_000


async def test_more_than_200_mb_streamed_is_413(gateway, org):
    async def chunks():
        line = b'{"custom_id": "x", "body": {"padding": "' + b"p" * 8000 + b'"}}\n'
        block = line * 128  # ~1 MB of 128 lines: 200 MiB in far fewer than 50,000 lines
        for _ in range(kept.MAX_UPLOAD_BYTES // len(block) + 2):
            yield block

    writer = aiohttp.MultipartWriter("form-data")
    writer.append("batch").set_content_disposition("form-data", name="purpose")
    part = writer.append(chunks(), {"Content-Type": "application/jsonl"})
    part.set_content_disposition("form-data", name="file", filename="big.jsonl")
    status, body = await post_form(gateway, org, writer)
    assert (status, body["error"]["param"]) == (413, "file"), body
    assert await events_of(gateway, FileStored) == []


async def test_a_20_mb_upload_is_kept_in_bounded_memory(gateway, org, tmp_path):
    line = b'{"custom_id": "x", "body": {"padding": "' + b"p" * 2000 + b'"}}\n'

    async def chunks():
        for _ in range(80):
            yield line * 128  # 80 x 128 lines of ~2 KB: ~20 MB

    writer = aiohttp.MultipartWriter("form-data")
    writer.append("batch").set_content_disposition("form-data", name="purpose")
    writer.append(chunks(), {"Content-Type": "application/jsonl"}).set_content_disposition(
        "form-data", name="file", filename="big.jsonl")
    tracemalloc.start()
    try:
        status, body = await post_form(gateway, org, writer)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (status, body["bytes"]) == (200, len(line) * 128 * 80), body
    assert peak < 8 * 1024 * 1024, f"peak {peak} bytes"  # the 20 MB never sat in memory
    assert (tmp_path / "files" / org["org_id"] / body["id"]).stat().st_size == body["bytes"]


async def test_a_declared_length_past_the_limit_is_413_at_once(gateway, org):
    response = await gateway.client.post("/v1/files", data=b"", headers={
        **auth(org["api_key"]), "Content-Type": "multipart/form-data; boundary=x",
        "Content-Length": str(kept.MAX_UPLOAD_BYTES + 1024 * 1024)}, skip_auto_headers=("Content-Length",))
    assert response.status == 413


async def test_listing_pages_in_either_order(gateway, org):
    client = sdk(gateway, org)
    ids = [(await client.files.create(file=(f"{n}.jsonl", LINES), purpose="batch")).id for n in range(3)]
    page = await gateway.client.get("/v1/files?limit=2", headers=auth(org["api_key"]))
    body = await page.json()
    assert ([f["id"] for f in body["data"]], body["has_more"], body["first_id"], body["last_id"]) == (
        ids[:0:-1], True, ids[2], ids[1])
    rest = await (await gateway.client.get(f"/v1/files?limit=2&after={ids[1]}", headers=auth(org["api_key"]))).json()
    assert ([f["id"] for f in rest["data"]], rest["has_more"]) == ([ids[0]], False)
    ascending = await (await gateway.client.get("/v1/files?order=asc", headers=auth(org["api_key"]))).json()
    assert [f["id"] for f in ascending["data"]] == ids
    assert [f.id async for f in client.files.list(purpose="batch")] == ids[::-1]
    assert (await client.files.list(purpose="batch_output")).data == []
    for query, param in (("limit=0", "limit"), ("limit=10001", "limit"), ("order=up", "order"),
                         ("after=file-nope", "after")):
        bad = await gateway.client.get(f"/v1/files?{query}", headers=auth(org["api_key"]))
        assert (bad.status, (await bad.json())["error"]["param"]) == (400, param)


async def test_the_batch_engine_writes_output_files(gateway, org):
    services = gateway.server.app[SERVICES]

    async def chunks():
        yield b'{"id": "batch_req_1"}\n'
        yield b'{"id": "batch_req_2"}\n'

    record = await kept.write_file(services, org["org_id"], "", purpose="batch_output", filename="out.jsonl",
                                   chunks=chunks())
    assert (record.lines, record.bytes, record.purpose) == (2, 44, "batch_output")
    assert await kept.stored_file(services, org["org_id"], record.file_id) == record
    assert await kept.stored_file(services, "org_other", record.file_id) is None
    content = await sdk(gateway, org).files.content(record.file_id)
    assert content.content == b'{"id": "batch_req_1"}\n{"id": "batch_req_2"}\n'
    assert content.response.headers["Content-Type"] == "application/jsonl"


@pytest.mark.parametrize("storage", ["local", "s3"])
async def test_the_sweeper_expires_files_and_content_is_410(make_gateway, config, tmp_path, storage, request):
    chosen = request.getfixturevalue("s3_config") if storage == "s3" else config
    gateway = await make_gateway(chosen)
    org = await gateway.new_org()
    client = sdk(gateway, org)
    created = await client.files.create(file=("in.jsonl", LINES), purpose="batch",
                                        expires_after={"anchor": "created_at", "seconds": 3600})
    config_file = tmp_path / "gateway.toml"
    if storage == "s3":
        config_file.write_text(sweeper_toml(chosen.ledger.url, chosen.storage.s3_endpoint_url,
                                            chosen.storage.s3_bucket))
    else:
        config_file.write_text(f'[ledger]\nurl = "{chosen.ledger.url}"\n')
    swept = await run_sweeper(config_file, "--once", "--as-of", "2999-01-01T00:00:00+00:00")
    assert swept.returncode == 0, swept.stderr
    [event] = await events_of(gateway, FileDeleted)
    assert (event.file_id, event.expired) == (created.id, True)
    with pytest.raises(openai.APIStatusError) as gone:
        await client.files.content(created.id)
    assert gone.value.status_code == 410 and "expired" in gone.value.body["message"]
    stored_event = (await events_of(gateway, FileStored))[0]
    assert not await gateway.server.app[SERVICES].files.exists(stored_event.object_key)


async def test_the_files_api_on_postgresql(make_pg_gateway, config):
    gateway = await make_pg_gateway(msgspec.structs.replace(config, batches=msgspec.structs.replace(
        config.batches, files_path=str(Path(config.ledger.url.removeprefix("sqlite:///")).parent / "pg-files"))))
    org = await gateway.new_org()
    client = sdk(gateway, org)
    created = await client.files.create(file=("in.jsonl", LINES), purpose="batch")
    assert [f.id for f in (await client.files.list()).data] == [created.id]
    assert (await client.files.content(created.id)).content == LINES
    assert (await client.files.delete(created.id)).deleted
    with pytest.raises(openai.APIStatusError) as gone:
        await client.files.content(created.id)
    assert gone.value.status_code == 410


async def test_an_upload_expecting_100_continue_past_the_limit_is_told_413_first(gateway, org):
    reader, writer = await asyncio.open_connection(gateway.server.host, gateway.server.port)
    writer.write(f"POST /v1/files HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer {org['api_key']}\r\n"
                 f"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: {kept.MAX_UPLOAD_BYTES * 2}\r\n"
                 "Expect: 100-continue\r\n\r\n".encode())
    status_line = await asyncio.wait_for(reader.readline(), 5)
    writer.close()
    assert status_line.startswith(b"HTTP/1.1 413")
    small = await gateway.client.post("/v1/files", data=form(purpose="batch"), expect100=True,
                                      headers=auth(org["api_key"]))
    assert small.status == 200
