"""GET / (spec 2.6, 4.6): the health report, its real checks, and `skip`."""

import msgspec

from tests.support import need_service
from gateway import __version__
from gateway.config import Config
from tests.gateway.gateway_helpers import closed_port


def with_redis(config: Config, url: str) -> Config:
    return msgspec.structs.replace(config, redis=msgspec.structs.replace(config.redis, url=url))


async def health(gateway, query: str = "") -> tuple[int, dict]:
    response = await gateway.client.get("/" + query)
    assert response.content_type == "application/json"
    return response.status, await response.json()


async def test_health_has_every_spec_field_with_its_type(gateway):
    status, body = await health(gateway)
    assert status == 200
    assert isinstance(body["message"], str)
    assert isinstance(body["version"], str)
    assert isinstance(body["health"]["status"], str)
    for check in ("redis", "database"):
        assert isinstance(body["health"][check]["connected"], bool)
        assert isinstance(body["health"][check]["error"], str)
    assert isinstance(body["health"]["ledger"]["pending_appends"], int)
    assert isinstance(body["health"]["ledger"]["oldest_pending_s"], float)


async def test_healthy_report_without_redis(gateway):
    status, body = await health(gateway)
    assert status == 200
    assert body == {
        "message": "model gateway is healthy",
        "version": __version__,
        "health": {
            "status": "ok",
            "redis": {"connected": False, "error": "not configured"},
            "database": {"connected": True, "error": ""},
            "ledger": {"pending_appends": 0, "oldest_pending_s": 0.0, "stuck": False},
        },
    }


async def test_version_is_the_package_version(gateway):
    _, body = await health(gateway)
    assert body["version"] == __version__ == "0.1.0"


async def test_health_is_not_cached(gateway):
    response = await gateway.client.get("/")
    assert response.headers["Cache-Control"] == "no-store"


async def test_skip_redis_and_database(gateway):
    status, body = await health(gateway, "?skip=redis,database")
    assert status == 200
    assert body["health"]["status"] == "ok"
    assert body["health"]["redis"] == {"connected": False, "error": "skipped"}
    assert body["health"]["database"] == {"connected": False, "error": "skipped"}


async def test_skip_database_only_still_checks_redis(gateway):
    _, body = await health(gateway, "?skip=database")
    assert body["health"]["database"] == {"connected": False, "error": "skipped"}
    assert body["health"]["redis"] == {"connected": False, "error": "not configured"}


async def test_skip_tolerates_spaces_and_unknown_names(gateway):
    status, body = await health(gateway, "?skip=%20redis%20,bogus")
    assert status == 200
    assert body["health"]["redis"] == {"connected": False, "error": "skipped"}
    assert body["health"]["database"] == {"connected": True, "error": ""}


async def test_reachable_redis_is_connected(make_gateway, config):
    need_service("127.0.0.1", 6379, "Redis")
    gateway = await make_gateway(with_redis(config, "redis://127.0.0.1:6379/0"))
    status, body = await health(gateway)
    assert status == 200
    assert body["health"]["status"] == "ok"
    assert body["health"]["redis"] == {"connected": True, "error": ""}


async def test_unreachable_redis_is_503_with_an_error(make_gateway, config):
    gateway = await make_gateway(with_redis(config, f"redis://127.0.0.1:{closed_port()}/0"))
    status, body = await health(gateway)
    assert status == 503
    assert body["message"] == "model gateway is unhealthy"
    assert body["health"]["status"] == "error"
    assert body["health"]["redis"]["connected"] is False
    assert isinstance(body["health"]["redis"]["error"], str)
    assert body["health"]["redis"]["error"] != ""
    assert body["health"]["database"] == {"connected": True, "error": ""}


async def test_unreachable_redis_can_be_skipped(make_gateway, config):
    gateway = await make_gateway(with_redis(config, f"redis://127.0.0.1:{closed_port()}/0"))
    status, body = await health(gateway, "?skip=redis")
    assert status == 200
    assert body["health"]["status"] == "ok"
    assert body["health"]["redis"] == {"connected": False, "error": "skipped"}
