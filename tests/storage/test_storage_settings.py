"""StorageSettings (the [storage] keys the gateway and the sweeper share) and open_store."""

import msgspec
import pytest

from storage.errors import StorageError
from storage.settings import StorageSettings, open_store
from tests.storage.storage_helpers import CREDENTIALS


def on_moto(s3_server: str, bucket: str) -> StorageSettings:
    return StorageSettings(s3_endpoint_url=s3_server, s3_bucket=bucket, s3_region=CREDENTIALS["region"],
                           s3_access_key_id=CREDENTIALS["access_key_id"],
                           s3_secret_access_key=CREDENTIALS["secret_access_key"])


def test_defaults_configure_no_storage():
    settings = StorageSettings()
    assert not settings.configured
    assert (settings.s3_bucket, settings.s3_region, settings.retention_days) == ("gateway-media", "us-east-1", 30)


def test_the_table_is_validated_key_by_key():
    with pytest.raises(msgspec.ValidationError, match="retention_days"):
        msgspec.convert({"retention_days": 0}, StorageSettings)
    with pytest.raises(msgspec.ValidationError, match="signing_secret"):  # the gateway's key, not ours
        msgspec.convert({"signing_secret": "s"}, StorageSettings)


async def test_no_endpoint_opens_no_store():
    async with open_store(StorageSettings()) as store:
        assert store is None


async def test_open_store_creates_the_bucket_and_stores(s3_server, s3_bucket, s3_client):
    async with open_store(on_moto(s3_server, s3_bucket)) as store:
        assert store is not None and store.bucket == s3_bucket
        await store.put("a", b"x", "text/plain")
    assert (await s3_client.get_object(Bucket=s3_bucket, Key="a"))["ContentLength"] == 1


async def test_open_store_without_creating_refuses_a_missing_bucket(s3_server, s3_bucket):
    with pytest.raises(StorageError):
        async with open_store(on_moto(s3_server, s3_bucket), create_bucket=False):
            pass
