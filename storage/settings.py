"""The [storage] settings the gateway and the sweeper share, and the store they open.

Both read the same table of the same TOML file (GATEWAY_STORAGE_<KEY> overrides it): where
the bucket is, its credentials, and how long hosted media is kept. The gateway's own section
adds the keys only it uses (download signing) by subclassing StorageSettings.
"""

import contextlib
from collections.abc import AsyncIterator
from typing import Annotated

import msgspec

from storage.objects import ObjectStore


class StorageSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Object storage for hosted media; an empty s3_endpoint_url means none is configured."""

    s3_endpoint_url: str = ""
    s3_bucket: str = "gateway-media"
    s3_region: str = "us-east-1"
    s3_access_key_id: str = ""
    s3_secret_access_key: str = ""
    retention_days: Annotated[int, msgspec.Meta(ge=1)] = 30

    @property
    def configured(self) -> bool:
        return bool(self.s3_endpoint_url)


@contextlib.asynccontextmanager
async def open_store(settings: StorageSettings, *, create_bucket: bool = True) -> AsyncIterator[ObjectStore | None]:
    """The configured bucket's ObjectStore for the block (None when none is configured).

    StorageError as ObjectStore.connect raises it; the client is closed on exit.
    """
    if not settings.configured:
        yield None
        return
    async with ObjectStore.connect(
            endpoint_url=settings.s3_endpoint_url, region=settings.s3_region,
            access_key_id=settings.s3_access_key_id, secret_access_key=settings.s3_secret_access_key,
            bucket=settings.s3_bucket, create_bucket=create_bucket) as store:
        yield store
