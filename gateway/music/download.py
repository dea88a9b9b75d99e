"""GET (and HEAD) /media/{object_key}: hosted audio through a signed link (gateway.music.links).

No API key: the signature is the permission, so an <audio> element can play the path. Ranges
and conditional requests are answered from the bucket by storage.serving.
"""

from aiohttp import web

from gateway.edge.errors import ApiError
from gateway.music.generation import MIME
from gateway.music.parts import MUSIC
from gateway.edge.state import SERVICES
from storage.objects import StorageError
from storage.serving import serve_object


async def media(request: web.Request) -> web.StreamResponse:
    """A signed download path: no API key, the signature is the permission."""
    services, key = request.app[SERVICES], request.match_info["object_key"]
    query = request.query
    if not request.app[MUSIC].signer.check(key, query.get("expires", ""), query.get("signature", "")):
        raise ApiError(403, "this download link is invalid or has expired", type="forbidden")
    if services.store is None:
        raise ApiError(404, "no object storage is configured", type="not_found")
    try:
        stored = await services.store.head(key)
        if stored is None:
            raise ApiError(410, "this track was deleted after the retention period", type="gone")
        return await serve_object(request, services.store, stored, MIME)
    except StorageError as exc:
        raise ApiError(502, f"object storage failed: {exc}", type="storage_error") from None
