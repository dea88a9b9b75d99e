"""The read side of music: history (spec 4.2), download resolution (4.3), idempotent replays."""

import msgspec

from gateway.edge.parsing import LOG_ID_PREFIX, WholeNumber, log_position
from gateway.edge.errors import ApiError
from gateway.jsonio import loads, number
from gateway.music.links import Signer
from gateway.services import Caller, Services
from ledger import log_queries
from ledger.log_queries import TrackRow
from ledger.money import from_nano
from ledger.schema import is_hosted

MAX_LIMIT = 100
LIMIT = WholeNumber("limit", 1, MAX_LIMIT, 30, "tracks to list, newest first")


class Track(msgspec.Struct, frozen=True):
    request_id: str
    org_id: str
    position: int
    created_at_us: int
    model: str
    provider: str
    storage: str
    error: bool
    object_key: str
    expired_at_us: int | None
    charged_inr_nano: int
    cost_usd_nano: int
    usd_to_inr: str
    prompt: dict | None  # None when the text was not kept or has been removed
    prompt_removed: bool
    text: str | None

    @property
    def log_id(self) -> str:
        """The id of the request's row in the request log (spec 4.3), as the dashboard shows it."""
        return f"{LOG_ID_PREFIX}{self.position}"

    @property
    def hosted(self) -> bool:
        return is_hosted(self.storage, self.error, self.expired_at_us)


def _track(row: TrackRow) -> Track:
    return Track(row.request_id, row.org_id, row.position, row.created_at_us, row.model, row.provider,
                 row.storage, bool(row.error), row.object_key, row.expired_at_us, row.charged_inr_nano,
                 row.cost_usd_nano, row.usd_to_inr, loads(row.prompt) if row.prompt else None,
                 row.prompt_removed_at_us is not None, loads(row.text) if row.text else None)


async def history(services: Services, caller: Caller, limit: int) -> list[dict]:
    rows = await log_queries.org_tracks(services.recorder, caller.org_id, limit)
    return [history_item(_track(row)) for row in rows]


def history_item(track: Track) -> dict:
    """One item of spec 2.2, plus the lyrics text and the log row id."""
    audio: dict[str, str | None] | None = None
    if track.hosted:
        audio = {"url": f"/v1/music/{track.request_id}/content", "mime_type": "audio/mpeg", "storage": "s3"}
    elif not track.error and track.storage != "s3":
        audio = {"url": None, "mime_type": "audio/mpeg", "storage": track.storage}
    return {"id": track.request_id, "object": "music.generation", "log_id": track.log_id,
            "prompt": (track.prompt or {}).get("prompt", ""), "text": track.text or "",
            "text_removed": track.prompt_removed, "created": track.created_at_us // 1_000_000,
            "audio": audio, "usage": {"cost_inr": number(from_nano(track.charged_inr_nano))},
            "metadata": {"used_model": track.model, "used_provider": track.provider, "response_format": "mp3"},
            "expired": track.expired_at_us is not None, "error": track.error}


async def find_track(services: Services, caller: Caller, track_id: str) -> Track:
    """The caller's track by request id or log row id; 404 alike for unknown and foreign ones."""
    if (position := log_position(track_id, "track_id")) is not None:
        row = await log_queries.track_at(services.recorder, caller.org_id, position)
    else:
        row = await log_queries.track(services.recorder, track_id)
    if row is None or row.org_id != caller.org_id:
        raise ApiError(404, "no such track", type="not_found")  # the same words whoever owns it
    return _track(row)


async def download_link(services: Services, signer: Signer, caller: Caller, track_id: str) -> tuple[str, int]:
    """Where the caller's track can be fetched, a short-lived path signed by `signer`, and until
    when; 410 once swept."""
    track = await find_track(services, caller, track_id)
    if track.expired_at_us is not None:
        raise ApiError(410, f"track {track_id} was deleted after the retention period", type="gone")
    if not track.hosted:
        raise ApiError(404, f"track {track_id} has no hosted audio (storage {track.storage})",
                       type="not_found")
    return signer.link(track.object_key)
