"""Batch deletes: splitting keys into DeleteObjects batches and reading S3's answers.

Pure functions over plain data, so the reading of a DeleteObjects response (including the
per-key `Errors` that ride inside a successful 200) is testable without an S3 server.
"""

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgspec

# S3 refuses a DeleteObjects request naming more than 1000 keys.
MAX_KEYS_PER_DELETE = 1000


class DeleteResult(msgspec.Struct, frozen=True):
    """Outcome of deleting many keys: those now absent, and key -> why it could not be deleted.

    A key that was already absent is in `deleted` (S3 semantics: the goal state holds).
    """

    deleted: list[str]
    failed: dict[str, str]


def batches(keys: Sequence[str], size: int = MAX_KEYS_PER_DELETE) -> Iterator[list[str]]:
    """The distinct keys, in first-seen order, in consecutive lists of at most `size`."""
    distinct = list(dict.fromkeys(keys))  # a key named twice must not be reported twice
    for start in range(0, len(distinct), size):
        yield distinct[start:start + size]


def delete_request(keys: Sequence[str]) -> dict[str, Any]:
    """The `Delete` argument of DeleteObjects for `keys`, non-quiet so every key is reported."""
    return {"Objects": [{"Key": key} for key in keys], "Quiet": False}


def read_response(keys: Sequence[str], response: Mapping[str, Any]) -> DeleteResult:
    """Classify each of `keys` from a successful DeleteObjects response.

    Keys listed under `Deleted` are deleted; keys under `Errors` fail with "Code: Message".
    A key the response does not mention at all counts as failed: claiming it deleted could
    let the caller forget an object that still exists, while a failure is simply retried.
    """
    failed = {
        error["Key"]: f"{error.get('Code', 'Unknown')}: {error.get('Message', 'no message')}"
        for error in response.get("Errors", [])
    }
    reported = {entry["Key"] for entry in response.get("Deleted", [])}
    deleted = [key for key in keys if key in reported and key not in failed]
    for key in keys:
        if key not in reported and key not in failed:
            failed[key] = "NotReported: DeleteObjects did not mention this key"
    return DeleteResult(deleted=deleted, failed=failed)


def whole_batch_failed(keys: Sequence[str], why: str) -> DeleteResult:
    """Every key of a batch whose DeleteObjects request failed as a whole, failed with `why`."""
    return DeleteResult(deleted=[], failed=dict.fromkeys(keys, why))


def combine(results: Sequence[DeleteResult]) -> DeleteResult:
    """One result holding every batch's deleted and failed keys, in batch order."""
    deleted = [key for result in results for key in result.deleted]
    failed = {key: why for result in results for key, why in result.failed.items()}
    return DeleteResult(deleted=deleted, failed=failed)
