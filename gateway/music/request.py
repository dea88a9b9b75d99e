"""POST /v1/music input: validation (spec 4.1 and 8) and prompt composition.

The gateway never fetches a URL a client gives it: reference images come only as data URLs
whose decoded bytes really are JPEG or PNG.
"""

import base64
import binascii
import hashlib
from typing import Annotated

import msgspec

from gateway.catalogue import Resolved
from gateway.edge.errors import bad_request
from gateway.providers.capabilities import MusicProvider
from gateway.resolution import MUSIC, Served, resolve
from gateway.services import Services

MAX_PROMPT_CHARS = 4096
MAX_IMAGES = 10
MAX_IMAGE_BYTES = 8 * 1024 * 1024
INSTRUMENTAL = "Instrumental only, no vocals."
# Ten images of 8 MB as base64 plus the text: the most a valid request can weigh.
MAX_BODY_BYTES = MAX_IMAGES * (MAX_IMAGE_BYTES * 4 // 3 + 1024) + 256 * 1024
MAGIC = {"jpeg": (b"\xff\xd8\xff",), "png": (b"\x89PNG\r\n\x1a\n",)}


class MusicRequest(msgspec.Struct, forbid_unknown_fields=False):
    model: str
    prompt: str
    response_format: str = "mp3"
    instrumental: bool = False
    lyrics: str | None = None
    reference_images: Annotated[list[str], msgspec.Meta(max_length=MAX_IMAGES)] = []


class Image(msgspec.Struct, frozen=True):
    mime_type: str
    data: bytes


def validate(services: Services, request: MusicRequest) -> tuple[Served[MusicProvider], list[Image]]:
    """The music model and its adapter, and the decoded reference images; 400 naming the
    problem otherwise (501 when no adapter of the model's provider makes music)."""
    served = resolve(services, request.model, MUSIC)
    if not request.prompt.strip():
        raise bad_request("prompt must not be empty", "prompt")
    if len(request.prompt) > MAX_PROMPT_CHARS:
        raise bad_request(f"prompt has {len(request.prompt)} characters; at most {MAX_PROMPT_CHARS}", "prompt")
    if request.response_format != "mp3":
        raise bad_request(f"response_format {request.response_format!r} is not available; only mp3",
                          "response_format")
    if request.reference_images and _max_images(served.model) == 0:
        raise bad_request(f"model {request.model!r} takes a text-only prompt; reference_images"
                          " need tune-3-pro-preview", "reference_images")
    return served, [decode_image(url, index) for index, url in enumerate(request.reference_images)]


def _max_images(model: Resolved) -> int:
    return int(model.record.per_request_limits.get("max_reference_images", "0"))


def decode_image(url: str, index: int) -> Image:
    """A `data:image/jpeg|png;base64,` URL whose bytes match its type and fit the size limit."""
    param = f"reference_images[{index}]"
    header, comma, payload = url.partition(",")
    subtype = header.removeprefix("data:image/").removesuffix(";base64").lower()
    if not comma or not header.startswith("data:image/") or not header.endswith(";base64"):
        raise bad_request(f"{param} must be a data URL (data:image/jpeg;base64,... or"
                          " data:image/png;base64,...); the gateway does not fetch URLs", param)
    subtype = "jpeg" if subtype == "jpg" else subtype
    if subtype not in MAGIC:
        raise bad_request(f"{param} is image/{subtype}; only JPEG and PNG are accepted", param)
    if len(payload) > (MAX_IMAGE_BYTES * 4 // 3) + 4:
        raise bad_request(f"{param} is larger than 8 MB", param)
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request(f"{param} is not valid base64", param) from None
    if len(data) > MAX_IMAGE_BYTES:
        raise bad_request(f"{param} is {len(data)} bytes; at most 8 MB (8388608 bytes)", param)
    if not data.startswith(MAGIC[subtype]):
        raise bad_request(f"{param} says image/{subtype} but its bytes are not a {subtype.upper()} image", param)
    return Image(f"image/{subtype}", data)


def compose_prompt(request: MusicRequest) -> str:
    """The text sent upstream: the prompt, then the instrumental note or the lyrics block."""
    if request.instrumental:
        return f"{request.prompt}\n\n{INSTRUMENTAL}"
    if request.lyrics and request.lyrics.strip():
        return f"{request.prompt}\n\nLyrics:\n{request.lyrics}"
    return request.prompt


def request_hash(body: dict) -> str:
    """Identifies a request body for Idempotency-Key matching, whatever its key order or spacing."""
    return hashlib.sha256(msgspec.json.encode(body, order="sorted")).hexdigest()  # big ints too
