"""Files kept for organizations (batch inputs and outputs): one small interface, FileStore, with
two implementations, the bucket (ObjectFiles, keys under FILES_PREFIX) and a local directory
(LocalFiles). Either is handed a finished local file to keep and streams it back in chunks; a
file is never held whole in memory. Every failure is a StorageError.
"""

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Literal, Protocol
from urllib.parse import quote

from storage.errors import StorageError
from storage.objects import ObjectStore

FILES_PREFIX = "files/"  # in the bucket shared with hosted media, files live under this
CHUNK_BYTES = 256 * 1024
DEFAULT_DIRECTORY = "./data/files"  # beside no ledger file (PostgreSQL, an in-memory SQLite)
StorageKind = Literal["s3", "local"]


class FileStore(Protocol):
    """Where kept files' bytes live. `kind` is what the ledger records ("s3" or "local")."""

    kind: StorageKind

    async def put(self, key: str, path: str, content_type: str) -> None:
        """Keep the finished local file at `path` under `key`, replacing what was there. The
        caller still owns (and removes) `path`. StorageError when it cannot be kept."""
        ...

    def stream(self, key: str, start: int | None = None, end: int | None = None) -> AsyncGenerator[bytes, None]:
        """Bytes [start, end] inclusive of the file under `key` (all of it when both are None),
        in chunks as they are read. A missing file raises StorageError at the first chunk."""
        ...

    async def delete(self, key: str) -> None:
        """Remove the file under `key`; one already absent is fine. StorageError otherwise."""
        ...

    async def exists(self, key: str) -> bool:
        """Whether a file is kept under `key`."""
        ...


class ObjectFiles:
    """Files in the bucket, under FILES_PREFIX; large ones uploaded in parts (storage.multipart)."""

    kind: StorageKind = "s3"

    def __init__(self, store: ObjectStore, prefix: str = FILES_PREFIX) -> None:
        self._store, self._prefix = store, prefix

    def object_key(self, key: str) -> str:
        return self._prefix + key

    async def put(self, key: str, path: str, content_type: str) -> None:
        await self._store.put_file(self.object_key(key), path, content_type)

    def stream(self, key: str, start: int | None = None, end: int | None = None) -> AsyncGenerator[bytes, None]:
        return self._store.stream(self.object_key(key), start, end, CHUNK_BYTES)

    async def delete(self, key: str) -> None:
        result = await self._store.delete_many([self.object_key(key)])
        if result.failed:
            raise StorageError(f"DELETE {self.object_key(key)} failed: {next(iter(result.failed.values()))}")

    async def exists(self, key: str) -> bool:
        return await self._store.head(self.object_key(key)) is not None


class LocalFiles:
    """Files under a root directory, each written whole or not at all (a temp file, renamed)."""

    kind: StorageKind = "local"

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def path(self, key: str) -> Path:
        """Where `key` lives: each segment percent-encoded, so no key can name a path outside
        the root (no '..', no absolute path, no separator of its own); StorageError for an
        empty segment or a dot segment."""
        segments = key.split("/")
        if any(segment in ("", ".", "..") for segment in segments):
            raise StorageError(f"invalid file key {key!r}: empty or dot segment")
        path = self.root.joinpath(*(quote(segment, safe="") for segment in segments))
        if not path.is_relative_to(self.root):  # cannot happen once quoted; kept as the guarantee
            raise StorageError(f"invalid file key {key!r}: outside the files directory")
        return path

    async def put(self, key: str, path: str, content_type: str) -> None:
        try:
            await asyncio.to_thread(_place, Path(path), self.path(key))
        except OSError as exc:
            raise StorageError(f"PUT {key} in {self.root} failed: {exc.strerror or exc}") from exc

    async def stream(self, key: str, start: int | None = None, end: int | None = None) -> AsyncGenerator[bytes, None]:
        try:
            source = await asyncio.to_thread(open, self.path(key), "rb")
        except OSError as exc:
            raise StorageError(f"GET {key} in {self.root} failed: {exc.strerror or exc}") from exc
        try:
            await asyncio.to_thread(source.seek, start or 0)
            left = None if end is None else end - (start or 0) + 1
            while (left is None or left > 0) and (chunk := await asyncio.to_thread(
                    source.read, CHUNK_BYTES if left is None else min(CHUNK_BYTES, left))):
                left = None if left is None else left - len(chunk)
                yield chunk
        except OSError as exc:
            raise StorageError(f"GET {key} in {self.root} failed: {exc.strerror or exc}") from exc
        finally:
            source.close()

    async def delete(self, key: str) -> None:
        try:
            await asyncio.to_thread(self.path(key).unlink, missing_ok=True)
        except OSError as exc:
            raise StorageError(f"DELETE {key} in {self.root} failed: {exc.strerror or exc}") from exc

    async def exists(self, key: str) -> bool:
        return await asyncio.to_thread(self.path(key).is_file)


def _place(source: Path, target: Path) -> None:
    """`source`'s bytes at `target`, whole: written (a hard link when both are on one file
    system, else a copy) to a temp name beside it, flushed, then renamed over it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    draft = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        try:
            os.link(source, draft)
        except OSError:  # another file system, or links not allowed: copied instead
            _copy(source, draft)
        os.replace(draft, target)
        _sync_directory(target.parent)  # the rename itself survives a crash
    finally:
        with contextlib.suppress(FileNotFoundError):
            draft.unlink()


def _copy(source: Path, draft: Path) -> None:
    with open(source, "rb") as reading, open(draft, "xb") as writing:
        while chunk := reading.read(CHUNK_BYTES * 4):
            writing.write(chunk)
        writing.flush()
        os.fsync(writing.fileno())


def _sync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def local_root(files_path: str, ledger_url: str) -> Path:
    """The local files directory: `files_path` when set; else `files` beside a SQLite ledger
    file; else DEFAULT_DIRECTORY (a PostgreSQL ledger, or an in-memory SQLite one)."""
    if files_path:
        return Path(files_path)
    database = ledger_url.removeprefix("sqlite:///") if ledger_url.startswith("sqlite:///") else ""
    if database in ("", ":memory:"):
        return Path(DEFAULT_DIRECTORY)
    return Path(database).parent / "files"


def file_store(store: ObjectStore | None, root: str | Path) -> FileStore:
    """Object storage when it is configured (`store`), else the directory `root`."""
    return LocalFiles(root) if store is None else ObjectFiles(store)
