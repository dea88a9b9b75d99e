"""The ECS/EKS container credentials endpoint, one source of the standard AWS credential chain
(reached by AWS_CONTAINER_CREDENTIALS_FULL_URI): temporary credentials with an expiry, so a
test can see a client renew them before they lapse, and how often it asked. Counted by a
`google_token.TokenStore`, as the other token endpoints are.

    GET  /_sim/aws/credentials           the simulator's test key pair and session token
    GET  /_sim/aws/credentials/issued    {"issued": N, "lifetime_s": S}
    POST /_sim/aws/credentials/lifetime  {"seconds": S}: how long those issued from now last
"""

from datetime import UTC, datetime, timedelta

from aiohttp import web

from simulator.cloud_credentials import AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN
from simulator.google_token import TokenStore, set_lifetime

DEFAULT_LIFETIME_S = 3600

ISSUED_KEY = web.AppKey("aws_container_credentials", TokenStore)


async def credentials(request: web.Request) -> web.Response:
    store = request.app[ISSUED_KEY]
    store.issue(AWS_SESSION_TOKEN)
    expiration = datetime.now(UTC) + timedelta(seconds=store.lifetime_s)
    return web.json_response({"AccessKeyId": AWS_ACCESS_KEY_ID, "SecretAccessKey": AWS_SECRET_ACCESS_KEY,
                              "Token": AWS_SESSION_TOKEN, "Expiration": expiration.strftime("%Y-%m-%dT%H:%M:%SZ")})


async def issued(request: web.Request) -> web.Response:
    return web.json_response(request.app[ISSUED_KEY].summary())


async def lifetime(request: web.Request) -> web.Response:
    return await set_lifetime(request.app[ISSUED_KEY], request)


def add_routes(app: web.Application) -> None:
    app[ISSUED_KEY] = TokenStore("", DEFAULT_LIFETIME_S)
    app.router.add_get("/_sim/aws/credentials", credentials)
    app.router.add_get("/_sim/aws/credentials/issued", issued)
    app.router.add_post("/_sim/aws/credentials/lifetime", lifetime)
