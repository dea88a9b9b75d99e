"""The PostgreSQL recorder: the shared contract, plus what only it has (schemas, URLs, locks).

Each test gets a schema of its own in the `test` database, dropped afterwards. Skipped locally
when no PostgreSQL listens on 127.0.0.1:5432; a failure under CI=true.
"""

import asyncio
import hashlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from ledger.backends.postgres import PostgresRecorder, dsn_and_schema, numbered
from tests.ledger.recorder_contract import RecorderContract
from tests.support import POSTGRES_DSN as DSN, need_service


def schema_for(tmp_path: Path) -> str:
    return "t_" + hashlib.sha1(str(tmp_path).encode()).hexdigest()[:20]


async def run(sql: str, *params, schema: str = "public") -> None:
    import asyncpg

    db = await asyncpg.connect(DSN, server_settings={"search_path": schema})
    try:
        await db.execute(sql, *params)
    finally:
        await db.close()


class TestPostgresRecorder(RecorderContract):
    @property
    def refusal(self) -> type[BaseException]:
        import asyncpg

        return asyncpg.RaiseError

    @pytest.fixture(autouse=True)
    async def own_schema(self, tmp_path: Path):
        need_service("127.0.0.1", 5432, "PostgreSQL")
        yield
        await run(f"DROP SCHEMA IF EXISTS {schema_for(tmp_path)} CASCADE")

    def make_recorder(self, tmp_path: Path) -> PostgresRecorder:
        return PostgresRecorder(DSN, schema_for(tmp_path))

    async def execute_raw(self, tmp_path: Path, sql: str, params: Sequence = ()) -> None:
        await run(numbered(sql), *params, schema=schema_for(tmp_path))

    def drop_immutability(self) -> Sequence[str]:
        return ["DROP TRIGGER events_are_immutable ON events"]


def test_the_ledger_url_may_name_a_schema():
    assert dsn_and_schema("postgresql://u@h:5432/db?schema=ledger_a") == ("postgresql://u@h:5432/db", "ledger_a")
    assert dsn_and_schema("postgresql://u@h/db?sslmode=disable") == ("postgresql://u@h/db?sslmode=disable", "public")
    with pytest.raises(ValueError, match="schema"):
        dsn_and_schema("postgresql://u@h/db?schema=x;drop")


def test_qmark_placeholders_become_numbered():
    assert numbered("SELECT ? , ? FROM t WHERE a = ?") == "SELECT $1 , $2 FROM t WHERE a = $3"


async def test_appends_from_many_recorders_keep_one_gapless_order(tmp_path):
    """Four recorders (as four processes) appending at once: positions and versions stay gapless."""
    need_service("127.0.0.1", 5432, "PostgreSQL")
    from ledger import audit
    from tests.ledger.ledger_helpers import append_ok, org, request, unit

    recorders = [PostgresRecorder(DSN, schema_for(tmp_path)) for _ in range(4)]
    try:
        for recorder in recorders:
            await recorder.open()
        await append_ok(recorders[0], unit("acme", org()))
        await asyncio.gather(*(append_ok(r, unit("acme", request(f"r{i}-{n}")))
                               for i, r in enumerate(recorders) for n in range(25)))
        events = await recorders[0].read(0, 1000)
        assert [e.position for e in events] == list(range(1, 102))
        assert [e.version for e in events] == list(range(1, 102))
        assert (await audit.verify(recorders[1]))[1] == []
    finally:
        for recorder in recorders:
            await recorder.close()
        await run(f"DROP SCHEMA IF EXISTS {schema_for(tmp_path)} CASCADE")
