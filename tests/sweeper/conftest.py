"""Fixtures for the sweeper tests: a SQLite ledger file and a bucket on the moto server."""

import pytest

from ledger.backends.sqlite import SQLiteRecorder
from storage.objects import ObjectStore
from tests.support import S3_CREDENTIALS


@pytest.fixture
def ledger_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path}/ledger.db"


@pytest.fixture
async def recorder(ledger_url):
    recorder = SQLiteRecorder.from_url(ledger_url)
    await recorder.open()
    yield recorder
    await recorder.close()


@pytest.fixture
async def store(s3_server, s3_bucket):
    """The bucket, created; the store the in-process sweeper deletes through."""
    async with ObjectStore.connect(endpoint_url=s3_server, bucket=s3_bucket, **S3_CREDENTIALS) as store:
        yield store
