"""Azure OpenAI: the v1 API and the deployments path, an api-key or an Entra ID token."""

from aiohttp import web


def add_routes(app: web.Application) -> None:
    """Register this family's routes on `app` (filled in by the issue 37 work)."""
