"""The two protocols OpenAI's Realtime API speaks: GA (the default) and beta (a handshake with
`OpenAI-Beta: realtime=v1`). The conversation is the same; names and shapes differ:

    beta                              GA
    modalities                        output_modalities (session and response.create)
    max_response_output_tokens        max_output_tokens
    conversation.item.created         conversation.item.added, then conversation.item.done
    response.text.delta / .done       response.output_text.delta / .done
    response.audio.delta / .done      response.output_audio.delta / .done
    response.audio_transcript.*       response.output_audio_transcript.*
    content parts text / audio        output_text / output_audio
    session: flat audio settings      session: type "realtime", audio.input / audio.output
"""

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import msgspec
from aiohttp import web

BETA_HEADER = "OpenAI-Beta"
BETA_VALUE = "realtime=v1"
GA_NAMES = MappingProxyType({
    "conversation.item.created": "conversation.item.added",
    "response.text.delta": "response.output_text.delta", "response.text.done": "response.output_text.done",
    "response.audio.delta": "response.output_audio.delta", "response.audio.done": "response.output_audio.done",
    "response.audio_transcript.delta": "response.output_audio_transcript.delta",
    "response.audio_transcript.done": "response.output_audio_transcript.done",
})
PCM = {"type": "audio/pcm", "rate": 24000}


class Dialect(msgspec.Struct, frozen=True):
    """What one protocol calls things; events are written under their beta names and renamed here."""

    modalities: str  # the key of the output modalities, in the session and in response.create
    max_tokens: str  # the session's output limit
    text_part: str
    audio_part: str
    names: Mapping[str, str]
    item_done: bool  # whether conversation.item.done follows an added item

    def name(self, beta_name: str) -> str:
        return self.names.get(beta_name, beta_name)

    def session(self, model: str) -> dict[str, Any]:
        """The session as `session.created` describes it, OpenAI's defaults."""
        common = {"id": "sess_sim", "object": "realtime.session", "model": model, "instructions": "",
                  "tools": [], "tool_choice": "auto", self.modalities: ["text", "audio"] if self is BETA else ["audio"],
                  self.max_tokens: "inf"}
        if self is BETA:
            return {**common, "voice": "alloy", "input_audio_format": "pcm16", "output_audio_format": "pcm16",
                    "input_audio_transcription": None, "turn_detection": None, "temperature": 0.8}
        return {**common, "type": "realtime", "audio": {"input": {"format": PCM, "transcription": None,
                                                                  "turn_detection": None},
                                                        "output": {"format": PCM, "voice": "alloy", "speed": 1.0}}}


BETA = Dialect("modalities", "max_response_output_tokens", "text", "audio", MappingProxyType({}), item_done=False)
GA = Dialect("output_modalities", "max_output_tokens", "output_text", "output_audio", GA_NAMES, item_done=True)


def dialect_of(request: web.Request) -> Dialect:
    return BETA if BETA_VALUE in request.headers.get(BETA_HEADER, "") else GA
