"""ObjectStore against a real S3 API server (moto) over real sockets."""

import json
import socket

import pytest

from storage.deletion import MAX_KEYS_PER_DELETE, batches, read_response
from storage.objects import ObjectStore, StorageError, StoredObject
from tests.storage.storage_helpers import CREDENTIALS, md5_etag, payload
from tests.support import count_objects, put_many


async def collect(chunks) -> list[bytes]:
    return [chunk async for chunk in chunks]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- put, head, stream ---------------------------------------------------------------------

async def test_put_head_stream_round_trip(store, s3_client):
    body = payload(100_000)
    stored = await store.put("tracks/a.mp3", body, "audio/mpeg")
    assert stored == StoredObject(key="tracks/a.mp3", size=len(body), etag=md5_etag(body))
    assert await store.head("tracks/a.mp3") == stored
    raw = await s3_client.head_object(Bucket=store.bucket, Key="tracks/a.mp3")
    assert raw["ETag"] == stored.etag and raw["ContentType"] == "audio/mpeg"
    assert b"".join(await collect(store.stream("tracks/a.mp3"))) == body


async def test_head_of_a_missing_key_is_none(store):
    assert await store.head("no/such/key") is None


async def test_stream_a_range_is_inclusive(store):
    body = payload(5_000)
    await store.put("k", body, "application/octet-stream")
    assert b"".join(await collect(store.stream("k", 10, 19))) == body[10:20]
    assert b"".join(await collect(store.stream("k", 4_990))) == body[4_990:]
    assert b"".join(await collect(store.stream("k", 0, 0))) == body[:1]
    assert b"".join(await collect(store.stream("k", None, 99))) == body[:100]


async def test_a_large_object_arrives_in_several_bounded_chunks(store):
    body = payload(3 * 1024 * 1024)
    await store.put("big", body, "audio/mpeg")
    chunks = await collect(store.stream("big", chunk_size=64 * 1024))
    assert len(chunks) > 1
    assert max(map(len, chunks)) <= 64 * 1024
    assert b"".join(chunks) == body


async def test_stopping_early_is_fine_and_the_store_stays_usable(store):
    await store.put("big", payload(1024 * 1024), "audio/mpeg")
    async for _ in store.stream("big", chunk_size=1024):
        break
    assert (await store.head("big")).size == 1024 * 1024


async def test_stream_of_a_missing_key_raises_before_any_byte(store):
    chunks = store.stream("no/such/key")
    with pytest.raises(StorageError, match="NoSuchKey"):
        await anext(chunks)


async def test_stream_refuses_an_object_replaced_since_it_was_described(store):
    old = await store.put("k", b"old bytes", "text/plain")
    await store.put("k", b"new bytes!", "text/plain")
    with pytest.raises(StorageError, match="PreconditionFailed"):
        await collect(store.stream("k", if_match=old.etag))


async def test_put_into_a_missing_bucket_raises_storage_error(s3_client):
    store = ObjectStore(s3_client, "bucket-that-does-not-exist")
    with pytest.raises(StorageError, match="NoSuchBucket") as caught:
        await store.put("k", b"x", "text/plain")
    assert CREDENTIALS["secret_access_key"] not in str(caught.value)


# --- bucket creation -----------------------------------------------------------------------

async def test_connect_creates_a_missing_bucket_and_reuses_an_existing_one(s3_server, s3_bucket,
                                                                           s3_client):
    names = {b["Name"] for b in (await s3_client.list_buckets())["Buckets"]}
    assert s3_bucket not in names
    for _ in range(2):  # the second connect finds the bucket already there
        async with ObjectStore.connect(endpoint_url=s3_server, bucket=s3_bucket,
                                       **CREDENTIALS) as store:
            await store.put("k", b"v", "text/plain")
    await s3_client.head_bucket(Bucket=s3_bucket)
    assert await count_objects(s3_client, s3_bucket) == 1


async def test_connect_without_create_bucket_refuses_a_missing_bucket(s3_server, s3_bucket, s3_client):
    with pytest.raises(StorageError, match=f"HEAD bucket {s3_bucket}"):
        async with ObjectStore.connect(endpoint_url=s3_server, bucket=s3_bucket, create_bucket=False,
                                       **CREDENTIALS):
            pass
    assert s3_bucket not in {b["Name"] for b in (await s3_client.list_buckets())["Buckets"]}


async def test_connect_creates_the_bucket_in_the_configured_region(s3_server, s3_bucket,
                                                                   s3_client):
    settings = {**CREDENTIALS, "region": "eu-west-1"}
    async with ObjectStore.connect(endpoint_url=s3_server, bucket=s3_bucket, **settings):
        pass
    location = await s3_client.get_bucket_location(Bucket=s3_bucket)
    assert location["LocationConstraint"] == "eu-west-1"


async def test_a_new_bucket_is_private(store, s3_client):
    acl = await s3_client.get_bucket_acl(Bucket=store.bucket)
    grants = {(g["Grantee"].get("URI"), g["Permission"]) for g in acl["Grants"]}
    assert all(uri is None for uri, _ in grants)  # no AllUsers / AuthenticatedUsers group


async def test_connect_ignores_the_ambient_aws_profile(s3_server, s3_bucket, monkeypatch):
    monkeypatch.setenv("AWS_PROFILE", "a-profile-this-machine-does-not-have")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws/config")
    async with ObjectStore.connect(endpoint_url=s3_server, bucket=s3_bucket,
                                   **CREDENTIALS) as store:
        assert (await store.put("k", b"v", "text/plain")).size == 1


async def test_connect_to_an_unreachable_endpoint_raises_storage_error(s3_bucket):
    with pytest.raises(StorageError, match="HEAD bucket") as caught:
        async with ObjectStore.connect(endpoint_url=f"http://127.0.0.1:{free_port()}",
                                       bucket=s3_bucket, **CREDENTIALS):
            pass
    assert CREDENTIALS["secret_access_key"] not in str(caught.value)


# --- delete_many ---------------------------------------------------------------------------

async def test_delete_many_deletes_2500_keys_in_three_batches(store, s3_client):
    keys = [f"tracks/{n:05}.mp3" for n in range(2_500)]
    await put_many(s3_client, store.bucket, keys)
    requests: list[int] = []
    s3_client.meta.events.register(
        "before-parameter-build.s3.DeleteObjects",
        lambda params, **_: requests.append(len(params["Delete"]["Objects"])))

    result = await ObjectStore(s3_client, store.bucket).delete_many(keys)

    assert requests == [1000, 1000, 500]
    assert result.failed == {} and result.deleted == keys
    assert await count_objects(s3_client, store.bucket) == 0


async def test_deleting_absent_keys_counts_as_deleted(store):
    await store.put("present", b"x", "text/plain")
    result = await store.delete_many(["present", "never-stored", "present"])
    assert result.deleted == ["present", "never-stored"] and result.failed == {}
    assert await store.head("present") is None


async def test_delete_many_of_nothing_sends_nothing(store):
    result = await store.delete_many([])
    assert result.deleted == [] and result.failed == {}


async def test_per_key_errors_are_reported_and_the_rest_deleted(store, s3_client):
    await s3_client.put_bucket_policy(Bucket=store.bucket, Policy=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:DeleteObject",
                       "Resource": f"arn:aws:s3:::{store.bucket}/locked/*"}]}))
    for key in ("locked/a", "free/b"):
        await store.put(key, b"x", "text/plain")

    result = await store.delete_many(["locked/a", "free/b"])

    assert result.deleted == ["free/b"]
    assert list(result.failed) == ["locked/a"] and "AccessDenied" in result.failed["locked/a"]
    assert await store.head("locked/a") is not None and await store.head("free/b") is None


async def test_a_failed_batch_fails_its_keys_and_the_next_batch_still_runs(store, s3_client):
    keys = [f"k{n:04}" for n in range(1_200)]
    stored = keys[::50]  # a sample on each side of the batch boundary (absent keys count too)
    await put_many(s3_client, store.bucket, stored)
    calls = []

    def first_batch_to_a_missing_bucket(params, **_):
        calls.append(params["Bucket"])
        if len(calls) == 1:
            params["Bucket"] = "bucket-that-does-not-exist"
    s3_client.meta.events.register("before-parameter-build.s3.DeleteObjects",
                                   first_batch_to_a_missing_bucket)

    result = await ObjectStore(s3_client, store.bucket).delete_many(keys)

    assert len(calls) == 2
    assert sorted(result.failed) == keys[:1000] and result.deleted == keys[1000:]
    assert all(why.startswith("NoSuchBucket:") for why in result.failed.values())
    remaining = await s3_client.list_objects_v2(Bucket=store.bucket)
    assert [o["Key"] for o in remaining["Contents"]] == [k for k in stored if k < "k1000"]


async def test_a_whole_request_failure_fails_every_key(s3_client):
    result = await ObjectStore(s3_client, "bucket-that-does-not-exist").delete_many(["a", "b"])
    assert result.deleted == [] and set(result.failed) == {"a", "b"}
    assert "NoSuchBucket" in result.failed["a"]


# --- reading DeleteObjects answers (pure) --------------------------------------------------

def test_read_response_takes_per_key_errors_from_a_successful_answer():
    # The shape botocore parses from a 200 DeleteObjects answer with per-key <Error>s.
    response = {
        "ResponseMetadata": {"HTTPStatusCode": 200},
        "Deleted": [{"Key": "a"}, {"Key": "c", "DeleteMarker": True,
                                   "DeleteMarkerVersionId": "v1"}],
        "Errors": [{"Key": "b", "Code": "AccessDenied", "Message": "Access Denied"},
                   {"Key": "d", "Code": "InternalError", "Message": "We encountered an error"}],
    }
    result = read_response(["a", "b", "c", "d", "e"], response)
    assert result.deleted == ["a", "c"]
    assert result.failed == {"b": "AccessDenied: Access Denied",
                             "d": "InternalError: We encountered an error",
                             "e": "NotReported: DeleteObjects did not mention this key"}


def test_batches_hold_at_most_1000_distinct_keys():
    keys = [str(n) for n in range(2_500)] + ["0"]
    assert [len(batch) for batch in batches(keys)] == [1000, 1000, 500]
    assert MAX_KEYS_PER_DELETE == 1000
