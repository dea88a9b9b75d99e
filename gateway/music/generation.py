"""Music generation (spec 4.1): one upstream call, a held price, hosted or inline audio."""

import asyncio
import base64
import time
from decimal import Decimal
from typing import Literal

import msgspec

from gateway.accounts import key_policy
from gateway.billing import reservations
from gateway.billing.charging import Outcome, commit, outcome, request_event, retained
from gateway.billing import pricing
from gateway.billing.pricing import Cost
from gateway.catalogue import Resolved
from gateway.edge.errors import ApiError, UpstreamError
from gateway.jsonio import number
from gateway.music.history import find_track
from gateway.music.idempotency import Claim, IdempotencyKeys, KeyTaken
from gateway.music.request import Image, MusicRequest, compose_prompt, request_hash, validate
from gateway.providers.base import MusicCall, MusicReply, SafetyBlocked
from gateway.providers.capabilities import MusicProvider
from gateway.resolution import Served
from gateway.services import Caller, Services
from ledger.events import MusicTrackRecorded
from ledger.money import from_nano
from ledger.recorder import Append, AppendRejected, Content
from storage.objects import StorageError, StoredObject

ROUTE = "/v1/music"
MIME = "audio/mpeg"
Storage = Literal["s3", "inline", "none"]  # where a track's audio went, as MusicTrackRecorded.storage says


class Generated(msgspec.Struct, frozen=True):
    """A finished generation, as the response and any idempotent replay render it."""

    request_id: str
    requested_model: str
    model: Resolved
    audio: bytes
    text: str
    storage: Storage
    cost: Cost
    created: int


def flat_cost(services: Services, model: Resolved) -> Cost:
    """The flat per-generation price in USD, and in INR at the configured rate."""
    return pricing.flat_cost(model.prices, services.config.billing.usd_to_inr)


def storage_label(services: Services, caller: Caller) -> Storage:
    """Spec 2.1: `none` when the org keeps nothing, `inline` without object storage, else `s3`."""
    account = services.directory.account(caller.org_id)
    if account is None or account.retention == "none":
        return "none"
    return "s3" if services.store is not None else "inline"


def object_key(caller: Caller) -> str:
    return f"{caller.org_id}/{caller.request_id}.mp3"


async def generate(services: Services, caller: Caller, request: MusicRequest, served: Served[MusicProvider],
                   images: list[Image], claim: Claim | None = None) -> Generated:
    """Hold the price and claim the Idempotency-Key, call upstream once, store the audio, then
    settle; never retried."""
    model = served.model
    api_key = await services.provider_keys.key_for(caller.org_id, model.provider_id)
    success = outcome(ROUTE, model, 200, cost=flat_cost(services, model), byok=bool(api_key))
    # Held: what success will charge; nothing when that is nothing (BYOK, or a free model).
    await _reserve(services, caller, model, success.charged_inr_nano, claim)
    try:
        reply = await _call_upstream(services, caller, request, served, images, api_key)
        if claim:  # before storing: a 504 must leave no object that no ledger event names
            claim.check_lease()
        storage = storage_label(services, caller)
        store = services.store if storage == "s3" else None
        stored = await store.put(object_key(caller), reply.audio, MIME) if store else None
    except BaseException as exc:  # cancelled too: the hold and the key are released either way
        await asyncio.shield(_failed(services, caller, request, model, claim, exc))
        error = _client_error(exc, model, request)
        if error is exc:
            raise
        raise error from None
    generated = Generated(caller.request_id, request.model, model, reply.audio, reply.text, storage,
                          success.cost, int(time.time()))
    await _succeeded(services, caller, request, success, generated, stored, claim)
    return generated


async def _reserve(services: Services, caller: Caller, model: Resolved, amount_inr_nano: int,
                   claim: Claim | None) -> None:
    """Hold the amount (0: nothing, as for BYOK or a free model) and claim the key, in one unit;
    KeyTaken if it is held, 402 (recorded) when the amount does not fit."""
    claimed = claim.events(caller.request_id) if claim else []
    try:
        if amount_inr_nano:
            await reservations.cover(services, caller, ROUTE, model, amount_inr_nano, claimed)
        elif claimed:
            await services.writer.append(Append(caller.org_id, claimed))
    except AppendRejected:  # the only constraint such a unit can break: the key's row
        raise KeyTaken() from None


async def _call_upstream(services: Services, caller: Caller, request: MusicRequest,
                         served: Served[MusicProvider], images: list[Image], api_key: str) -> MusicReply:
    call = MusicCall(caller.request_id, served.model.upstream_model, compose_prompt(request),
                     [(image.mime_type, image.data) for image in images], api_key)
    return await served.provider.generate_music(call, services.config.music.upstream_timeout_s)


async def _succeeded(services: Services, caller: Caller, request: MusicRequest, success: Outcome,
                     generated: Generated, stored: StoredObject | None,
                     claim: Claim | None) -> None:
    prompt = _retained_prompt(services, caller, request)
    text = retained(services, caller, "_t", generated.text)
    track = MusicTrackRecorded(
        request_id=caller.request_id, model=generated.model.model_id, provider=generated.model.provider_id,
        storage=generated.storage, object_key=stored.key if stored else "", size=stored.size if stored else 0,
        etag=stored.etag if stored else "", prompt_content_id=prompt.content_id if prompt else "",
        text_content_id=text.content_id if text else "", idempotency_key=claim.key if claim else "",
        request_hash=claim.request_hash if claim else "")
    await commit(services, caller, [request_event(caller, success, prompt), track], [prompt, text])


async def _failed(services: Services, caller: Caller, request: MusicRequest, model: Resolved,
                  claim: Claim | None, exc: BaseException) -> None:
    """Release the hold and the key, and log the failure in history (error: true, cost 0)."""
    status = getattr(_client_error(exc, model, request), "status", 500) if isinstance(exc, Exception) else 499
    prompt = _retained_prompt(services, caller, request)
    track = MusicTrackRecorded(request_id=caller.request_id, model=model.model_id,
                               provider=model.provider_id, storage="none", error=True,
                               prompt_content_id=prompt.content_id if prompt else "")
    failure = outcome(ROUTE, model, status, error=str(exc)[:500] or type(exc).__name__)
    released = [claim.released(caller.request_id)] if claim else []
    await commit(services, caller, [request_event(caller, failure, prompt), track, *released], [prompt])


def _retained_prompt(services: Services, caller: Caller, request: MusicRequest) -> Content | None:
    """What the org's history keeps of the request, success or failure alike."""
    return retained(services, caller, "_p", {"prompt": request.prompt, "lyrics": request.lyrics,
                                              "instrumental": request.instrumental})


def _client_error(exc: BaseException, model: Resolved, request: MusicRequest) -> BaseException:
    match exc:
        case SafetyBlocked():
            return ApiError(422, f"{exc}; the request was not charged", type="content_blocked",
                            code="safety_blocked")
        case UpstreamError():
            return exc.to_api_error(model.provider_id, request.model, overload_passes=False)  # spec 7's table
        case StorageError():
            return ApiError(502, f"the audio could not be stored: {exc}; not charged",
                            type="storage_error")
    return exc


def response_body(services: Services, generated: Generated) -> dict:
    """The `music.generation` object of spec 2.1."""
    audio: dict[str, object] = {"base64": base64.b64encode(generated.audio).decode(), "mime_type": MIME,
             "storage": generated.storage}
    if generated.storage == "s3":
        audio |= {"url": f"/v1/music/{generated.request_id}/content",
                  "expires_in_days": services.config.storage.retention_days}
    return {"id": generated.request_id, "object": "music.generation", "model": generated.requested_model,
            "used_model": generated.model.model_id, "used_provider": generated.model.provider_id,
            "audio": audio, "text": generated.text,
            "usage": {"cost_usd": number(from_nano(generated.cost.usd_total_nano)),
                      "cost_inr": number(from_nano(generated.cost.inr_nano))},
            "created": generated.created}


async def create(services: Services, keys: IdempotencyKeys, caller: Caller, body: dict, request: MusicRequest,
                 idempotency_key: str | None) -> dict:
    """POST /v1/music: validate, then generate once (or replay the first answer for the key,
    claimed in `keys`)."""
    served, images = validate(services, request)
    await key_policy.permitted(services, caller, ROUTE, request.model, [served])
    if not idempotency_key:
        return response_body(services, await generate(services, caller, request, served, images))
    digest = request_hash(body)
    generated: Generated = await keys.once(
        caller.org_id, idempotency_key, digest,
        lambda claim: generate(services, caller, request, served, images, claim),
        lambda request_id: replay(services, caller, request, request_id))
    return response_body(services, generated)


async def replay(services: Services, caller: Caller, request: MusicRequest, request_id: str) -> Generated | None:
    """The first answer rebuilt from the ledger and the bucket; None if its audio was not stored."""
    track = await find_track(services, caller, request_id)
    if not track.hosted or services.store is None:
        return None
    audio = b"".join([chunk async for chunk in services.store.stream(track.object_key)])
    cost = Cost(track.cost_usd_nano, 0, track.charged_inr_nano, Decimal(track.usd_to_inr))
    return Generated(request_id, request.model, services.catalogue.resolve(track.model), audio,
                     track.text or "", "s3", cost, track.created_at_us // 1_000_000)  # hosted: in s3
