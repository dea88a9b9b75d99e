"""The Compute Engine metadata server, as google-auth's compute-engine credentials use it.

Point google-auth at the simulator with ``GCE_METADATA_HOST=127.0.0.1:PORT`` (read when
``google.auth.compute_engine._metadata`` is imported) and ``GCE_METADATA_IP=127.0.0.1:PORT`` (the
ping, read at each call). Every request must carry ``Metadata-Flavor: Google`` (else 403) and
every answer carries it back, as the real server does:

    GET /                                                     the ping: 200, empty
    GET /computeMetadata/v1/instance/service-accounts/{account}/?recursive=true
                                                              {"email", "scopes", "aliases"}
    GET /computeMetadata/v1/instance/service-accounts/default/token[?scopes=a,b]
                                                              the token JSON of `google_token`
    GET /computeMetadata/v1/project/project-id                GOOGLE_PROJECT, as text
    GET /computeMetadata/v1/universe/universe-domain          googleapis.com, as text

``{account}`` is ``default`` or SERVICE_ACCOUNT_EMAIL; anything else is 404. Tokens come from
the same store as ``POST /token``'s (counted by ``GET /_sim/google/tokens``).
"""

from aiohttp import web

from simulator.cloud_credentials import GOOGLE_PROJECT, SERVICE_ACCOUNT_EMAIL
from simulator.google_token import CLOUD_PLATFORM_SCOPE, GOOGLE_TOKENS_KEY, token_body

ROOT = "/computeMetadata/v1"
FLAVOR = {"Metadata-Flavor": "Google"}
ACCOUNTS = frozenset({"default", SERVICE_ACCOUNT_EMAIL})
SCOPES = [CLOUD_PLATFORM_SCOPE, "https://www.googleapis.com/auth/userinfo.email"]


def _flavored(request: web.Request) -> web.Response | None:
    """403 unless `request` carries ``Metadata-Flavor: Google``, as the real server answers."""
    if request.headers.get("Metadata-Flavor") == "Google":
        return None
    return web.Response(status=403, headers=FLAVOR, content_type="text/html",
                        text="Missing required header: Metadata-Flavor")


def _text(text: str) -> web.Response:
    return web.Response(text=text, content_type="application/text", headers=FLAVOR)


async def ping(request: web.Request) -> web.Response:
    """GET / -> 200 with the ``Metadata-Flavor: Google`` header google-auth's ping looks for."""
    return web.Response(text="computeMetadata/\n", content_type="application/text", headers=FLAVOR)


async def service_account(request: web.Request) -> web.Response:
    """GET .../service-accounts/{account}/ -> the account's email, scopes and aliases."""
    if (refused := _flavored(request)) is not None:
        return refused
    if request.match_info["account"] not in ACCOUNTS:
        return web.Response(status=404, headers=FLAVOR, text="Not found")
    body = {"email": SERVICE_ACCOUNT_EMAIL, "scopes": SCOPES, "aliases": ["default"]}
    return web.json_response(body, headers=FLAVOR)


async def access_token(request: web.Request) -> web.Response:
    """GET .../service-accounts/{account}/token -> a new access token of the account."""
    if (refused := _flavored(request)) is not None:
        return refused
    if request.match_info["account"] not in ACCOUNTS:
        return web.Response(status=404, headers=FLAVOR, text="Not found")
    return web.json_response(token_body(request.app[GOOGLE_TOKENS_KEY]), headers=FLAVOR)


async def project_id(request: web.Request) -> web.Response:
    """GET .../project/project-id -> the project, as text."""
    refused = _flavored(request)
    return refused if refused is not None else _text(GOOGLE_PROJECT)


async def universe_domain(request: web.Request) -> web.Response:
    """GET .../universe/universe-domain -> googleapis.com, as text."""
    refused = _flavored(request)
    return refused if refused is not None else _text("googleapis.com")


def add_routes(app: web.Application) -> None:
    """Mount the metadata server's routes (the token store is `google_token`'s)."""
    app.router.add_get("/", ping)
    app.router.add_get(ROOT + "/instance/service-accounts/{account}/", service_account)
    app.router.add_get(ROOT + "/instance/service-accounts/{account}/token", access_token)
    app.router.add_get(ROOT + "/project/project-id", project_id)
    app.router.add_get(ROOT + "/universe/universe-domain", universe_domain)
