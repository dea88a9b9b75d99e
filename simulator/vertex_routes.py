"""Google Vertex AI: Gemini (generateContent, streamGenerateContent) and Claude (rawPredict, streamRawPredict), OAuth access tokens from its token endpoint."""

from aiohttp import web


def add_routes(app: web.Application) -> None:
    """Register this family's routes on `app` (filled in by the issue 37 work)."""
