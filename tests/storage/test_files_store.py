"""storage.files: one contract, both FileStores (a local directory, the bucket on the moto server)."""

from pathlib import Path

import pytest

from storage.errors import StorageError
from storage.objects import ObjectStore
from storage.files import FILES_PREFIX, FileStore, LocalFiles, ObjectFiles, file_store, local_root
from tests.storage.storage_helpers import payload


@pytest.fixture(params=["local", "s3"])
def files(request, tmp_path) -> FileStore:
    if request.param == "local":
        return LocalFiles(tmp_path / "kept")
    return ObjectFiles(request.getfixturevalue("store"))


def written(tmp_path: Path, body: bytes, name: str = "upload.tmp") -> str:
    path = tmp_path / name
    path.write_bytes(body)
    return str(path)


async def read(files: FileStore, key: str, start: int | None = None, end: int | None = None) -> bytes:
    return b"".join([chunk async for chunk in files.stream(key, start, end)])


async def test_a_file_put_is_streamed_back_whole_and_in_ranges(files, tmp_path):
    body = payload(600_000)
    await files.put("org_a/file-1", written(tmp_path, body), "application/jsonl")
    assert await files.exists("org_a/file-1")
    assert await read(files, "org_a/file-1") == body
    assert await read(files, "org_a/file-1", 10, 99) == body[10:100]
    assert await read(files, "org_a/file-1", 599_990) == body[599_990:]


async def test_put_replaces_and_the_callers_file_is_left_alone(files, tmp_path):
    await files.put("org_a/f", written(tmp_path, b"first"), "text/plain")
    second = written(tmp_path, b"second", "second.tmp")
    await files.put("org_a/f", second, "text/plain")
    assert await read(files, "org_a/f") == b"second"
    assert Path(second).read_bytes() == b"second"


async def test_delete_removes_and_a_missing_file_is_fine(files, tmp_path):
    await files.put("org_a/f", written(tmp_path, b"x"), "text/plain")
    await files.delete("org_a/f")
    await files.delete("org_a/f")
    await files.delete("org_a/never-there")
    assert not await files.exists("org_a/f")


async def test_streaming_a_missing_file_raises_storage_error(files):
    with pytest.raises(StorageError):
        await read(files, "org_a/absent")


async def test_a_large_file_goes_to_the_bucket_in_parts(store, s3_client, tmp_path):
    # (Memory is not measured here: the moto server in this process keeps every part.)
    body = payload(9 * 1024 * 1024 + 123, seed=3)
    await store.put_file("files/big", written(tmp_path, body), "application/jsonl", part_bytes=5 * 1024 * 1024)
    head = await s3_client.head_object(Bucket=store.bucket, Key="files/big")
    assert head["ContentLength"] == len(body) and head["ETag"].endswith('-2"')  # a two-part upload
    assert await read(ObjectFiles(store, prefix=""), "files/big") == body


async def test_object_files_live_under_the_files_prefix(store, s3_client, tmp_path):
    await ObjectFiles(store).put("org_a/file-1", written(tmp_path, b"{}\n"), "application/jsonl")
    listed = await s3_client.list_objects_v2(Bucket=store.bucket)
    assert [item["Key"] for item in listed["Contents"]] == [FILES_PREFIX + "org_a/file-1"]


async def test_a_multipart_upload_that_fails_is_a_storage_error(store, tmp_path):
    path = written(tmp_path, payload(6 * 1024 * 1024))
    missing = ObjectStore(store._client, "no-such-bucket-for-files")
    with pytest.raises(StorageError, match="no-such-bucket-for-files"):
        await missing.put_file("files/x", path, "text/plain", part_bytes=5 * 1024 * 1024)


@pytest.mark.parametrize("key", ["../escape", "org/../../escape", "/etc/passwd", "org//f", "org/.", ""])
def test_a_key_that_could_leave_the_root_is_refused(tmp_path, key):
    with pytest.raises(StorageError):
        LocalFiles(tmp_path).path(key)


def test_odd_characters_stay_inside_the_root(tmp_path):
    files = LocalFiles(tmp_path)
    for key in ("org\\..\\x", "org/%2e%2e", "org/a b", "org/\u00e9"):
        assert files.path(key).is_relative_to(tmp_path.resolve())
    assert files.path("org/a%2Fb") != files.path("org/a/b")


async def test_a_local_put_leaves_no_temp_file_behind(tmp_path):
    files = LocalFiles(tmp_path / "kept")
    await files.put("org/f", written(tmp_path, b"abc"), "text/plain")
    assert sorted(p.name for p in (tmp_path / "kept" / "org").iterdir()) == ["f"]


def test_the_local_directory_is_beside_a_sqlite_ledger_else_data_files(tmp_path):
    assert local_root("", f"sqlite:///{tmp_path}/ledger.db") == tmp_path / "files"
    assert local_root("", "sqlite:///./data/gateway.db") == Path("data/files")
    assert local_root("", "sqlite:///:memory:") == Path("./data/files")
    assert local_root("", "postgresql://u@h/db") == Path("./data/files")
    assert local_root("/srv/files", "sqlite:///x.db") == Path("/srv/files")


def test_object_storage_is_used_when_configured(tmp_path, store):
    assert file_store(None, tmp_path).kind == "local"
    assert file_store(store, tmp_path).kind == "s3"
