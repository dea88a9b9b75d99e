"""The private-bucket client: one aiobotocore S3 client per process, opened with `connect`.

Every S3 failure surfaces as StorageError. Objects are streamed, never read whole.
"""

import contextlib
import os
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

import msgspec
from aiobotocore.session import AioSession, get_session
from botocore.config import Config

from storage.deletion import (DeleteResult, batches, combine, delete_request, read_response,
                              whole_batch_failed)
from storage.errors import S3_FAILURES, StorageError, error_code, reason, storage_error
from storage.multipart import PART_BYTES, upload_file

__all__ = ["DeleteResult", "ObjectStore", "StorageError", "StoredObject"]

# Error codes meaning "no such object/bucket". HEAD answers carry no body, so botocore can
# only report the bare status ("404"); GETs name it ("NoSuchKey", "NoSuchBucket").
_ABSENT = frozenset({"404", "NotFound", "NoSuchKey", "NoSuchBucket"})

# The region whose CreateBucket must not name a LocationConstraint.
_DEFAULT_REGION = "us-east-1"


class StoredObject(msgspec.Struct, frozen=True):
    """An object in the bucket: its key, size in bytes, and ETag exactly as S3 gives it.

    The ETag keeps its quotes: it is a strong validator, sent and compared verbatim.
    """

    key: str
    size: int
    etag: str


def client_config() -> Config:
    """Signature v4 and path-style addressing, so moto and S3-compatible stores work too."""
    return Config(signature_version="s3v4", s3={"addressing_style": "path"},
                  retries={"max_attempts": 2, "mode": "standard"})


def isolated_session() -> AioSession:
    """An aiobotocore session that reads neither AWS_PROFILE nor the ~/.aws files.

    All our settings are explicit; without this a stray AWS_PROFILE naming a profile that is
    not on this machine makes client creation fail (ProfileNotFound). Each entry maps a
    botocore setting to (config-file key, environment variable, default, converter).
    """
    return get_session({"profile": (None, None, None, None),
                        "config_file": (None, None, os.devnull, None),
                        "credentials_file": (None, None, os.devnull, None)})


def s3_range(start: int | None, end: int | None) -> str | None:
    """The Range header asking S3 for bytes [start, end] inclusive; None for the whole object."""
    if start is None and end is None:
        return None
    return f"bytes={start or 0}-{'' if end is None else end}"


class ObjectStore:
    """Objects in one private bucket. Build it with `ObjectStore.connect(...)`."""

    def __init__(self, client: Any, bucket: str) -> None:
        """Wrap an already open aiobotocore S3 client; its owner closes it. No bucket check."""
        self._client = client
        self.bucket = bucket

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, *, endpoint_url: str, region: str, access_key_id: str,
                      secret_access_key: str, bucket: str,
                      create_bucket: bool = True) -> AsyncIterator["ObjectStore"]:
        """Open the S3 client, make sure the bucket exists, and close the client on exit.

        Credentials are given explicitly, so no environment variable or ~/.aws file is
        consulted for them. A missing bucket is created (private) if `create_bucket`;
        StorageError if the bucket cannot be reached, or is missing and not to be created.
        """
        async with isolated_session().create_client(
                "s3", endpoint_url=endpoint_url, region_name=region,
                aws_access_key_id=access_key_id, aws_secret_access_key=secret_access_key,
                config=client_config()) as client:
            store = cls(client, bucket)
            await store._ensure_bucket(region, create_bucket)
            yield store

    async def _ensure_bucket(self, region: str, create: bool) -> None:
        """Create the bucket unless it exists; a concurrent creator (another replica) is fine.

        Probe first rather than create blindly: least-privilege credentials often may use
        the bucket but not create buckets.
        """
        try:
            await self._client.head_bucket(Bucket=self.bucket)
            return
        except S3_FAILURES as exc:
            if error_code(exc) not in _ABSENT or not create:
                raise storage_error(f"HEAD bucket {self.bucket}", exc) from exc
        await self._create_bucket(region)

    async def _create_bucket(self, region: str) -> None:
        """CreateBucket with a private ACL, tolerating BucketAlreadyOwnedByYou."""
        options: dict[str, Any] = {"Bucket": self.bucket, "ACL": "private"}
        if region != _DEFAULT_REGION:
            options["CreateBucketConfiguration"] = {"LocationConstraint": region}
        try:
            await self._client.create_bucket(**options)
        except S3_FAILURES as exc:
            if error_code(exc) != "BucketAlreadyOwnedByYou":
                raise storage_error(f"CREATE bucket {self.bucket}", exc) from exc

    def _where(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    async def put(self, key: str, body: bytes, content_type: str) -> StoredObject:
        """Store `body` under `key` (replacing any object there); returns what S3 stored."""
        try:
            response = await self._client.put_object(
                Bucket=self.bucket, Key=key, Body=body, ContentType=content_type)
        except S3_FAILURES as exc:
            raise storage_error(f"PUT {self._where(key)}", exc) from exc
        return StoredObject(key=key, size=len(body), etag=response["ETag"])

    async def put_file(self, key: str, path: str, content_type: str, part_bytes: int = PART_BYTES) -> None:
        """Store the local file at `path` under `key`, in parts of `part_bytes` when it is larger
        (storage.multipart): never read whole into memory."""
        await upload_file(self._client, self.bucket, key, path, content_type, part_bytes)

    async def head(self, key: str) -> StoredObject | None:
        """The object under `key`, or None when there is none."""
        try:
            response = await self._client.head_object(Bucket=self.bucket, Key=key)
        except S3_FAILURES as exc:
            if error_code(exc) in _ABSENT:
                return None
            raise storage_error(f"HEAD {self._where(key)}", exc) from exc
        return StoredObject(key=key, size=response["ContentLength"], etag=response["ETag"])

    async def stream(self, key: str, start: int | None = None, end: int | None = None,
                     chunk_size: int = 64 * 1024, *,
                     if_match: str | None = None) -> AsyncGenerator[bytes, None]:
        """Yield bytes [start, end] inclusive of the object (all of it when both are None).

        Chunks of at most `chunk_size` bytes are yielded as they arrive from S3; the object
        is never held whole. The GET is sent when the first chunk is asked for, so a missing
        object or unreachable S3 raises StorageError there, before anything is yielded.
        `if_match` (an ETag) makes S3 refuse (StorageError) if the object has been replaced,
        so one answer never mixes bytes of two versions. A short read raises StorageError.
        """
        if chunk_size <= 0:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        body = await self._open(key, s3_range(start, end), if_match)
        try:
            async for chunk in body.iter_chunks(chunk_size):
                yield chunk
        except S3_FAILURES as exc:
            raise storage_error(f"GET {self._where(key)} (reading the body)", exc) from exc
        finally:
            await body.aclose()  # frees the connection even when the consumer stops early

    async def _open(self, key: str, byte_range: str | None, if_match: str | None) -> Any:
        """Send the GET and return the still-unread streaming body."""
        options = {"Bucket": self.bucket, "Key": key}
        if byte_range is not None:
            options["Range"] = byte_range
        if if_match is not None:
            options["IfMatch"] = if_match
        try:
            response = await self._client.get_object(**options)
        except S3_FAILURES as exc:
            raise storage_error(f"GET {self._where(key)} {byte_range or ''}".rstrip(), exc) \
                from exc
        return response["Body"]

    async def delete_many(self, keys: Sequence[str]) -> DeleteResult:
        """Delete `keys` with DeleteObjects, at most 1000 per request; never raises for S3.

        Per-key errors inside a successful answer land in `failed`; so do all keys of a batch
        whose request failed as a whole, and the next batch is still tried. Keys that were
        already absent count as deleted.
        """
        results = [await self._delete_batch(batch) for batch in batches(keys)]
        return combine(results)

    async def _delete_batch(self, keys: list[str]) -> DeleteResult:
        try:
            response = await self._client.delete_objects(
                Bucket=self.bucket, Delete=delete_request(keys))
        except S3_FAILURES as exc:
            return whole_batch_failed(keys, reason(exc))
        return read_response(keys, response)
