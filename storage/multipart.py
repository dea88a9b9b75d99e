"""Putting a local file in the bucket: one PUT while it is small, else an S3 multipart upload in
parts of PART_BYTES, each read from disk as it is sent (never the whole file in memory). An
upload that fails is aborted, so no half-uploaded parts are left to be billed."""

import asyncio
import contextlib
import os
from typing import IO, Any

from storage.errors import S3_FAILURES, storage_error

PART_BYTES = 8 * 1024 * 1024  # S3's parts are at least 5 MiB (but the last), at most 10,000 of them


async def upload_file(client: Any, bucket: str, key: str, path: str, content_type: str,
                      part_bytes: int = PART_BYTES) -> None:
    """Store the file at `path` under `key`; StorageError when S3 fails (nothing left behind)."""
    where = f"s3://{bucket}/{key}"
    with open(path, "rb") as source:  # noqa: ASYNC230 (opening is quick; reads go to a thread)
        if os.fstat(source.fileno()).st_size <= part_bytes:
            body = await asyncio.to_thread(source.read)
            try:
                await client.put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type)
            except S3_FAILURES as exc:
                raise storage_error(f"PUT {where}", exc) from exc
            return
        await _in_parts(client, bucket, key, source, content_type, part_bytes)


async def _in_parts(client: Any, bucket: str, key: str, source: IO[bytes], content_type: str,
                    part_bytes: int) -> None:
    where = f"s3://{bucket}/{key}"
    try:
        started = await client.create_multipart_upload(Bucket=bucket, Key=key, ContentType=content_type)
    except S3_FAILURES as exc:
        raise storage_error(f"CREATE MULTIPART {where}", exc) from exc
    upload_id = started["UploadId"]
    try:
        parts = await _send_parts(client, bucket, key, upload_id, source, part_bytes)
        await client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                               MultipartUpload={"Parts": parts})
    except S3_FAILURES as exc:
        await _abort(client, bucket, key, upload_id)
        raise storage_error(f"MULTIPART PUT {where}", exc) from exc
    except BaseException:  # cancelled, or the file could not be read: the parts are dropped, then it goes on
        await _abort(client, bucket, key, upload_id)
        raise


async def _send_parts(client: Any, bucket: str, key: str, upload_id: str, source: IO[bytes],
                      part_bytes: int) -> list[dict]:
    parts: list[dict] = []
    while data := await asyncio.to_thread(source.read, part_bytes):
        number = len(parts) + 1
        sent = await client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=data)
        parts.append({"ETag": sent["ETag"], "PartNumber": number})
    return parts


async def _abort(client: Any, bucket: str, key: str, upload_id: str) -> None:
    """Best effort: a bucket's lifecycle rule is what cleans up an abort that fails too."""
    with contextlib.suppress(*S3_FAILURES):
        await asyncio.shield(client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id))
