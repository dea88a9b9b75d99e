"""The Google adapter: the Gemini API `generateContent` format. Serves the music models.

A music answer carries a text part (lyrics and structure) and an `inlineData` part with the
MP3. Gemini reports safety refusals three ways, all mapped to SafetyBlocked: a 200 with
`promptFeedback.blockReason`, a candidate stopped for safety with no audio, or a 400 saying
the prompt was blocked.
"""

import asyncio
import base64
import binascii

import aiohttp

from gateway.config import ProviderConfig
from gateway.errors import UpstreamError
from gateway.providers.base import MusicCall, MusicReply, SafetyBlocked
from gateway.providers.http import post_json, read_json

SAFETY_FINISH = frozenset({"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION",
                           "IMAGE_SAFETY"})


def music_body(call: MusicCall) -> dict:
    parts: list[dict] = [{"text": call.prompt}]
    parts += [{"inlineData": {"mimeType": mime, "data": base64.b64encode(data).decode()}}
              for mime, data in call.images]
    return {"contents": [{"role": "user", "parts": parts}],
            "generationConfig": {"responseModalities": ["AUDIO", "TEXT"]}}


def music_reply(body: dict) -> MusicReply:
    """The audio and text of a Gemini answer, or why there is none."""
    if reason := (body.get("promptFeedback") or {}).get("blockReason"):
        raise SafetyBlocked(f"the prompt was blocked by the provider's safety filter ({reason})")
    candidate = (body.get("candidates") or [{}])[0]
    parts = (candidate.get("content") or {}).get("parts") or []
    audio = next((p["inlineData"] for p in parts if "inlineData" in p), None)
    if audio is None and candidate.get("finishReason") in SAFETY_FINISH:
        raise SafetyBlocked(f"the generation was stopped by the provider's safety filter"
                            f" ({candidate['finishReason']})")
    if audio is None:
        raise UpstreamError(502, "google returned no audio for the music generation")
    try:
        data = base64.b64decode(audio.get("data", ""), validate=True)
    except (binascii.Error, ValueError):
        raise UpstreamError(502, "google returned audio that is not valid base64") from None
    text = "".join(p.get("text", "") for p in parts if "text" in p)
    return MusicReply(data, audio.get("mimeType", "audio/mpeg"), text)


class GoogleProvider:
    id = "google"
    capabilities = frozenset({"music"})

    def __init__(self, config: ProviderConfig, session: aiohttp.ClientSession) -> None:
        self._base = config.base_url.rstrip("/")
        self._api_key = config.api_key
        self._session = session

    def headers(self, api_key: str = "") -> dict[str, str]:
        """Request headers with the org's own key when it has one (BYOK), else the gateway's."""
        headers = {"Content-Type": "application/json"}
        if key := api_key or self._api_key:
            headers["x-goog-api-key"] = key
        return headers

    async def generate_music(self, call: MusicCall, timeout_s: float) -> MusicReply:
        url = f"{self._base}/v1beta/models/{call.upstream_model}:generateContent"
        timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=10)
        try:
            async with asyncio.timeout(timeout_s):  # the whole round trip, body included
                response = await post_json(self._session, self.id, url, music_body(call),
                                           self.headers(call.api_key), timeout)
                return music_reply(await read_json(self.id, response))
        except TimeoutError:
            raise UpstreamError(504, f"google did not finish the generation within {timeout_s:g} s") from None
        except UpstreamError as exc:
            if exc.status == 400 and "block" in exc.message.lower():
                raise SafetyBlocked(exc.message) from None
            raise
