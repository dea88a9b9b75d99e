"""AWS Bedrock Runtime: Converse, ConverseStream (binary event stream) and InvokeModel, SigV4 or a bearer API key."""

from aiohttp import web


def add_routes(app: web.Application) -> None:
    """Register this family's routes on `app` (filled in by the issue 37 work)."""
