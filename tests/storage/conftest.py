"""Fixtures for the storage tests: an ObjectStore and a raw S3 client on the moto server."""

import pytest

from storage.objects import ObjectStore, client_config, isolated_session
from storage_helpers import CREDENTIALS


@pytest.fixture
async def store(s3_server: str, s3_bucket: str):
    """An ObjectStore on a fresh bucket (connect creates it)."""
    async with ObjectStore.connect(endpoint_url=s3_server, bucket=s3_bucket,
                                   **CREDENTIALS) as connected:
        yield connected


@pytest.fixture
async def s3_client(s3_server: str):
    """A plain aiobotocore S3 client, to check what our code did from the outside."""
    async with isolated_session().create_client(
            "s3", endpoint_url=s3_server, region_name=CREDENTIALS["region"],
            aws_access_key_id=CREDENTIALS["access_key_id"],
            aws_secret_access_key=CREDENTIALS["secret_access_key"],
            config=client_config()) as client:
        yield client
