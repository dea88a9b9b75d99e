"""The ECS/EKS container credentials endpoint, one source of the standard AWS credential chain
(reached by AWS_CONTAINER_CREDENTIALS_FULL_URI): temporary credentials with an expiry, so a
test can see a client renew them before they lapse, and how often it asked.

    GET  /_sim/aws/credentials           the simulator's test key pair and session token
    GET  /_sim/aws/credentials/issued    {"issued": N, "lifetime_s": S}
    POST /_sim/aws/credentials/lifetime  {"seconds": S}: how long those issued from now last
"""

from datetime import UTC, datetime, timedelta

import msgspec
from aiohttp import web

from simulator.cloud_credentials import AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN

DEFAULT_LIFETIME_S = 3600.0


class Issuer(msgspec.Struct):
    """What this simulator has handed out, and for how long it hands out the next."""

    issued: int = 0
    lifetime_s: float = DEFAULT_LIFETIME_S


ISSUER_KEY = web.AppKey("aws_container_issuer", Issuer)


async def credentials(request: web.Request) -> web.Response:
    issuer = request.app[ISSUER_KEY]
    issuer.issued += 1
    expiration = datetime.now(UTC) + timedelta(seconds=issuer.lifetime_s)
    return web.json_response({"AccessKeyId": AWS_ACCESS_KEY_ID, "SecretAccessKey": AWS_SECRET_ACCESS_KEY,
                              "Token": AWS_SESSION_TOKEN, "Expiration": expiration.strftime("%Y-%m-%dT%H:%M:%SZ")})


async def issued(request: web.Request) -> web.Response:
    issuer = request.app[ISSUER_KEY]
    return web.json_response({"issued": issuer.issued, "lifetime_s": issuer.lifetime_s})


async def set_lifetime(request: web.Request) -> web.Response:
    seconds = (await request.json()).get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
        return web.json_response({"error": "seconds must be a positive number"}, status=400)
    request.app[ISSUER_KEY].lifetime_s = float(seconds)
    return web.json_response({"lifetime_s": float(seconds)})


def add_routes(app: web.Application) -> None:
    app[ISSUER_KEY] = Issuer()
    app.router.add_get("/_sim/aws/credentials", credentials)
    app.router.add_get("/_sim/aws/credentials/issued", issued)
    app.router.add_post("/_sim/aws/credentials/lifetime", set_lifetime)
