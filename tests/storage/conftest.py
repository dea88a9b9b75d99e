"""Fixtures for the storage tests: an ObjectStore on the moto server."""

import pytest

from storage.objects import ObjectStore
from tests.storage.storage_helpers import CREDENTIALS


@pytest.fixture
async def store(s3_server: str, s3_bucket: str):
    """An ObjectStore on a fresh bucket (connect creates it)."""
    async with ObjectStore.connect(endpoint_url=s3_server, bucket=s3_bucket,
                                   **CREDENTIALS) as connected:
        yield connected
