"""serve_object over real HTTP: an aiohttp app serving objects stored in moto."""

import aiohttp
import pytest
from aiohttp import web

from storage.objects import ObjectStore, StorageError, StoredObject
from storage.ranges import MAX_RANGES
from storage.serving import serve_object
from tests.storage.storage_helpers import payload

SIZE = 10_000
BODY = payload(SIZE)
CONTENT_TYPE = "audio/mpeg"
STORE = web.AppKey("store", ObjectStore)


async def serve(request: web.Request) -> web.StreamResponse:
    """Serve /{key}; /stale/{key} and /short/{key} describe the object wrongly on purpose."""
    store = request.app[STORE]
    obj = await store.head(request.match_info["key"])
    if obj is None:
        raise web.HTTPNotFound()
    if request.match_info["how"] == "stale/":  # replaced since it was looked up
        obj = StoredObject(key=obj.key, size=obj.size, etag='"an-older-version"')
    elif request.match_info["how"] == "short/":  # S3 will send fewer bytes than promised
        obj = StoredObject(key=obj.key, size=obj.size + 1_000, etag=obj.etag)
    try:
        return await serve_object(request, store, obj, CONTENT_TYPE)
    except StorageError as exc:
        return web.json_response({"error": str(exc)}, status=502)


@pytest.fixture
async def client(store, aiohttp_client):
    await store.put("track.mp3", BODY, CONTENT_TYPE)
    app = web.Application()
    app[STORE] = store
    app.router.add_route("*", r"/{how:(stale/|short/)?}{key}", serve)
    return await aiohttp_client(app)


@pytest.fixture
async def etag(store, client) -> str:
    return (await store.head("track.mp3")).etag


async def fetch(client, headers=None, method="GET", path="/track.mp3"):
    async with client.request(method, path, headers=headers or {}) as response:
        body = await response.read()
    assert response.headers["Accept-Ranges"] == "bytes"  # on every answer
    return response, body


async def fetch_parts(client, headers) -> tuple[aiohttp.ClientResponse, list[tuple]]:
    """GET a multipart/byteranges answer; its parts as (Content-Type, Content-Range, bytes)."""
    async with client.get("/track.mp3", headers=headers) as response:
        assert response.status == 206
        assert response.headers["Accept-Ranges"] == "bytes"
        reader = aiohttp.MultipartReader(response.headers, response.content)
        parts = [(part.headers["Content-Type"], part.headers["Content-Range"], await part.read())
                 async for part in reader]
    return response, parts


# --- 200 and single-range 206 ----------------------------------------------------------------

async def test_full_get(client, etag):
    response, body = await fetch(client)
    assert response.status == 200 and body == BODY
    assert response.headers["Content-Length"] == str(SIZE)
    assert response.headers["Content-Type"] == CONTENT_TYPE
    assert response.headers["ETag"] == etag
    assert response.headers["Cache-Control"] == "private, max-age=3600"
    assert "Content-Range" not in response.headers


@pytest.mark.parametrize(("header", "first", "last"), [
    ("bytes=0-0", 0, 0),                          # first byte
    (f"bytes={SIZE - 1}-{SIZE - 1}", SIZE - 1, SIZE - 1),  # last byte
    ("bytes=1234-5678", 1234, 5678),              # middle
    ("bytes=0-", 0, SIZE - 1),                    # everything, as a range
    ("bytes=6000-", 6000, SIZE - 1),              # open-ended from the middle
    ("bytes=-1", SIZE - 1, SIZE - 1),             # suffix of one byte
    ("bytes=-700", SIZE - 700, SIZE - 1),         # suffix smaller than the size
    (f"bytes=-{SIZE}", 0, SIZE - 1),              # suffix equal to the size
    (f"bytes=-{SIZE * 3}", 0, SIZE - 1),          # suffix larger than the size
    (f"bytes=9000-{SIZE * 5}", 9000, SIZE - 1),   # end beyond the size: clamped
    (f"bytes=0-{SIZE - 1}", 0, SIZE - 1),         # the whole range spelled out
    ("bytes=0-9,5000000-", 0, 9),                 # the unsatisfiable one of two dropped
])
async def test_single_range(client, etag, header, first, last):
    response, body = await fetch(client, {"Range": header})
    assert response.status == 206
    assert body == BODY[first:last + 1]
    assert response.headers["Content-Range"] == f"bytes {first}-{last}/{SIZE}"
    assert response.headers["Content-Length"] == str(last - first + 1)
    assert response.headers["Content-Type"] == CONTENT_TYPE
    assert response.headers["ETag"] == etag


# --- several ranges: multipart/byteranges ------------------------------------------------------

@pytest.mark.parametrize("ranges", [
    [(0, 99), (5000, 5099)],
    [(10, 19), (9990, 9999), (200, 2000)],
    [(0, 499), (250, 749)],  # overlapping, served as asked
])
async def test_several_ranges(client, ranges):
    header = "bytes=" + ",".join(f"{first}-{last}" for first, last in ranges)
    response, parts = await fetch_parts(client, {"Range": header})
    assert response.headers["Content-Type"].startswith("multipart/byteranges; boundary=")
    assert "Content-Range" not in response.headers
    assert parts == [(CONTENT_TYPE, f"bytes {first}-{last}/{SIZE}", BODY[first:last + 1])
                     for first, last in ranges]


async def test_multipart_content_length_is_the_exact_body_length(client):
    response, body = await fetch(client, {"Range": "bytes=0-0,-1,100-199"})
    assert response.status == 206
    assert int(response.headers["Content-Length"]) == len(body)
    boundary = response.headers["Content-Type"].split("boundary=")[1]
    assert body.endswith(f"\r\n--{boundary}--\r\n".encode())
    assert body.count(f"--{boundary}\r\n".encode()) == 3


async def test_suffix_and_open_ended_parts(client):
    _, parts = await fetch_parts(client, {"Range": "bytes=-10,9995-"})
    assert [(r, data) for _, r, data in parts] == [
        (f"bytes {SIZE - 10}-{SIZE - 1}/{SIZE}", BODY[-10:]),
        (f"bytes 9995-{SIZE - 1}/{SIZE}", BODY[9995:])]


# --- Range headers that are ignored -------------------------------------------------------------

@pytest.mark.parametrize("header", [
    "bytes=" + ",".join(f"{n * 100}-{n * 100 + 9}" for n in range(MAX_RANGES + 1)),  # too many
    "bytes=abc", "items=0-1", "bytes=5-2", "bytes=-", "bytes=0-1;2-3",  # invalid syntax
])
async def test_ignored_range_gives_the_full_object(client, header):
    response, body = await fetch(client, {"Range": header})
    assert response.status == 200 and body == BODY
    assert response.headers["Content-Length"] == str(SIZE)


# --- 416 -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("header", [f"bytes={SIZE}-", f"bytes={SIZE * 2}-{SIZE * 3}", "bytes=-0"])
async def test_unsatisfiable_range(client, etag, header):
    response, body = await fetch(client, {"Range": header})
    assert response.status == 416 and body == b""
    assert response.headers["Content-Range"] == f"bytes */{SIZE}"
    assert response.headers["ETag"] == etag


# --- conditional requests ------------------------------------------------------------------------

async def test_if_range_with_the_current_etag_honours_the_range(client, etag):
    response, body = await fetch(client, {"Range": "bytes=10-19", "If-Range": etag})
    assert response.status == 206 and body == BODY[10:20]


@pytest.mark.parametrize("validator", [
    '"an-older-version"', "W/{etag}", "Wed, 21 Oct 2015 07:28:00 GMT"])
async def test_if_range_with_another_validator_sends_everything(client, etag, validator):
    headers = {"Range": "bytes=10-19", "If-Range": validator.format(etag=etag)}
    response, body = await fetch(client, headers)
    assert response.status == 200 and body == BODY


@pytest.mark.parametrize("if_none_match", ["{etag}", 'W/{etag}', '"x", {etag}', "*"])
async def test_if_none_match_gives_304_without_a_body(client, etag, if_none_match):
    headers = {"If-None-Match": if_none_match.format(etag=etag), "Range": "bytes=0-9"}
    response, body = await fetch(client, headers)
    assert response.status == 304 and body == b""
    assert response.headers["ETag"] == etag
    assert response.headers["Cache-Control"] == "private, max-age=3600"


async def test_if_none_match_with_another_etag_serves_normally(client):
    response, body = await fetch(client, {"If-None-Match": '"an-older-version"'})
    assert response.status == 200 and body == BODY


# --- HEAD ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("headers", [
    {}, {"Range": "bytes=0-99"}, {"Range": "bytes=0-9,20-29"}, {"Range": f"bytes={SIZE}-"}])
async def test_head_sends_the_headers_of_the_get_without_a_body(client, headers):
    get, _ = await fetch(client, headers)
    head, body = await fetch(client, headers, method="HEAD")
    assert body == b""
    assert head.status == get.status
    for name in ("Content-Length", "Content-Range", "ETag", "Cache-Control", "Accept-Ranges"):
        assert head.headers.get(name) == get.headers.get(name), name
    get_type, head_type = get.headers.get("Content-Type", ""), head.headers.get("Content-Type", "")
    if get_type.startswith("multipart/"):  # the boundary is random per answer
        get_type, head_type = get_type.split(";")[0], head_type.split(";")[0]
    assert head_type == get_type


async def test_other_methods_are_refused(client):
    async with client.post("/track.mp3") as response:
        assert response.status == 405
        assert response.headers["Allow"] == "GET,HEAD"


# --- streaming and failures ----------------------------------------------------------------------

async def test_a_large_object_is_streamed_whole(store, client):
    big = payload(3 * 1024 * 1024, seed=3)
    await store.put("big.mp3", big, CONTENT_TYPE)
    response, body = await fetch(client, path="/big.mp3")
    assert response.status == 200 and body == big
    response, body = await fetch(client, {"Range": "bytes=1000000-2999999"}, path="/big.mp3")
    assert response.status == 206 and body == big[1_000_000:3_000_000]


async def test_s3_failing_before_the_headers_lets_the_caller_answer(client):
    async with client.get("/stale/track.mp3") as response:
        assert response.status == 502
        assert "PreconditionFailed" in (await response.json())["error"]


async def test_s3_failing_after_the_headers_cuts_the_connection(client, caplog):
    async with client.get("/short/track.mp3") as response:
        assert response.status == 200
        assert response.headers["Content-Length"] == str(SIZE + 1_000)
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()
    assert "aborted the response for track.mp3" in caplog.text
