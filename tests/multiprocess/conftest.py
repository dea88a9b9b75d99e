"""Fixtures for the multi-process tests: the ledger their gateway processes share."""

import pytest

from tests.gateway.gateway_helpers import shared_ledger_url


@pytest.fixture(params=["sqlite", "postgresql"])
async def ledger_url(request, tmp_path):
    """A fresh ledger for the test's gateway processes to share: a SQLite file, then a PostgreSQL
    schema of its own (skips locally, fails under CI=true, without PostgreSQL)."""
    async with shared_ledger_url(request.param, tmp_path, "processes") as url:
        yield url
