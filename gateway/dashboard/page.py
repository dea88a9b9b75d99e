"""The dashboard page (GET /dashboard): static files shipped in gateway/dashboard/static, no build
step; its routes are in gateway.dashboard.routes.

The page signs in with an API key kept in sessionStorage and uses only the ordinary /v1 API;
the policy below lets it load nothing but its own files and talk to nothing but this origin.
"""

from pathlib import Path

from aiohttp import web

from gateway.edge.errors import ApiError

STATIC = Path(__file__).with_name("static")
POLICY = "; ".join((
    "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
    "media-src 'self' blob:", "connect-src 'self'", "font-src 'self'", "manifest-src 'self'",
    "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'"))
HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-cache",
}
CONTENT_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css",
                 ".svg": "image/svg+xml", ".png": "image/png", ".ico": "image/x-icon"}


def _file(name: str) -> web.FileResponse:
    path = STATIC / name
    content_type = CONTENT_TYPES.get(path.suffix)
    # Only a plain file name of a known kind: nothing outside STATIC can be named.
    if content_type is None or "/" in name or "\\" in name or name.startswith(".") or not path.is_file():
        raise ApiError(404, f"no dashboard file {name!r}", type="not_found")
    return web.FileResponse(path, headers={**HEADERS, "Content-Type": f"{content_type}; charset=utf-8"
                                           if content_type.startswith("text/") else content_type})


async def page(_request: web.Request) -> web.FileResponse:
    return _file("index.html")


async def asset(request: web.Request) -> web.FileResponse:
    return _file(request.match_info["name"])

