"""What the real providers bill for the media in a prompt, as the simulator reports it.

Each provider's published rule, applied to the part's real bytes (read here, apart from the
gateway's code: this is the provider's side):

- OpenAI images: the tile rule (scaled to fit 2048 px, shortest side to 768 px, never up; each
  512 px tile `tile` tokens plus `base`; detail "low" the base only), gpt-4o-mini's tokens
  multiplied; other model names are text models here (their images cost nothing). An image by
  URL is fetched by the real API and billed at its size; the simulator fetches nothing, so it
  bills the largest such image. Audio: 10 tokens a second. A PDF: the image of each page (as
  the largest image) and its text (PDF_PAGE_TEXT_TOKENS a page).
- Anthropic images: width x height / 750, scaled first to a long edge of 1568 px and ~1.15 MP
  (1,600 tokens); by URL, 1,600; an image it cannot read, nothing (the real API refuses it).
  A PDF: each page as the largest image plus its text.
- Gemini: an image of at most 384 px both ways 258 tokens, else 258 per 768 px tile; an image it
  cannot read, 258; audio 32 tokens a second; video 263 a second (its length read as MP3's would
  be, else a minute); a PDF page 258 tokens; text a token per four bytes.
"""

import base64
import binascii
import math
import re
import struct
from types import MappingProxyType

from simulator.mp3 import mp3_duration_s

# (base, per tile), by model name prefix
OPENAI_TILES = MappingProxyType({"gpt-4o-mini": (2833, 5667), "gpt-4o": (85, 170)})
OPENAI_AUDIO_PER_S = 10
ANTHROPIC_LONG_EDGE, ANTHROPIC_MOST_PIXELS, ANTHROPIC_MOST_TOKENS = 1568, 1_150_000, 1600
GEMINI_TOKENS, GEMINI_AUDIO_PER_S, GEMINI_VIDEO_PER_S = 258, 32, 263
PDF_PAGE_TEXT_TOKENS = 500
UNKNOWN_VIDEO_S = 60
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)[^,]*?;base64,(.*)", re.DOTALL)
_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")


def raw(data: str | None) -> bytes:
    try:
        return base64.b64decode(data or "", validate=True)
    except (binascii.Error, ValueError):
        return b""


def data_url(url: object) -> tuple[str, bytes] | None:
    """(media type, bytes) of a base64 data URL; None for any other URL."""
    match = _DATA_URL.fullmatch(url) if isinstance(url, str) else None
    return (match[1], raw(match[2])) if match else None


def image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height of a PNG, GIF, WebP (VP8X) or JPEG image."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if data[:3] == b"GIF" and len(data) >= 10:
        return struct.unpack("<HH", data[6:10])
    if data[:4] == b"RIFF" and data[8:16] == b"WEBPVP8X" and len(data) >= 30:
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    return _jpeg_size(data) if data[:2] == b"\xff\xd8" else None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 <= len(data) and data[at] == 0xFF:
        marker = data[at + 1]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[at + 5:at + 9])
            return width, height
        at += 2 + struct.unpack(">H", data[at + 2:at + 4])[0]
    return None


def audio_seconds(data: bytes, kind: str) -> float:
    """How long a WAV or MP3 clip plays (0 when it is neither)."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return _wav_seconds(data)
    return mp3_duration_s(data) if "mp" in kind else 0.0


def _wav_seconds(data: bytes) -> float:
    at, rate = 12, 0
    while at + 8 <= len(data):
        name, size = data[at:at + 4], struct.unpack("<I", data[at + 4:at + 8])[0]
        if name == b"fmt ":
            rate = struct.unpack("<I", data[at + 16:at + 20])[0]
        if name == b"data" and rate:
            return min(size, len(data) - at - 8) / rate
        at += 8 + size + size % 2
    return 0.0


def pdf_pages(data: bytes) -> int:
    return max(len(_PAGE.findall(data)), 1)


# -- OpenAI -----------------------------------------------------------------------------------

def openai_tiles(model: str) -> tuple[int, int]:
    """(base, per tile) of a vision model; a model without a published rule (gpt-sim) is a text
    model here, and its images cost nothing."""
    known = [name for name in OPENAI_TILES if model.startswith(name)]
    return OPENAI_TILES[max(known, key=len)] if known else (0, 0)


def openai_image(model: str, url: object, detail: object) -> int:
    base, tile = openai_tiles(model)
    if detail == "low":
        return base
    inline = data_url(url)
    size = image_size(inline[1]) if inline else None
    width, height = map(float, size or (768, 2048))  # by URL: the largest image the rule bills
    for most, side in ((2048, max), (768, min)):
        scale = min(1.0, most / side(width, height))
        width, height = width * scale, height * scale
    return base + tile * math.ceil(width / 512) * math.ceil(height / 512)


def openai_part(model: str, part: dict) -> int:
    """Tokens of one chat or Responses content part beyond its text (0 for text)."""
    kind = part.get("type")
    if kind == "image_url":
        image = part.get("image_url")
        url, detail = (image.get("url"), image.get("detail")) if isinstance(image, dict) else (image, None)
        return openai_image(model, url, detail)
    if kind == "input_image":
        return openai_image(model, part.get("image_url"), part.get("detail"))
    if kind == "input_audio":
        audio = part.get("input_audio") or {}
        return math.ceil(audio_seconds(raw(audio.get("data")), str(audio.get("format"))) * OPENAI_AUDIO_PER_S)
    if kind in ("file", "input_file"):
        inline = data_url((part.get("file") or {}).get("file_data") if kind == "file" else part.get("file_data"))
        pages = pdf_pages(inline[1]) if inline else 1
        return pages * (openai_image(model, None, None) + PDF_PAGE_TEXT_TOKENS)
    return 0


def openai_media_tokens(model: str, messages: list) -> int:
    """What the media parts of chat messages (or Responses input items) cost on `model`."""
    return sum(openai_part(model, part) for message in messages if isinstance(message, dict)
               and isinstance(message.get("content"), list)
               for part in message["content"] if isinstance(part, dict))


# -- Anthropic --------------------------------------------------------------------------------

def anthropic_image(source: dict) -> int:
    if source.get("type") != "base64":
        return ANTHROPIC_MOST_TOKENS
    size = image_size(raw(source.get("data")))
    if size is None:
        return 0  # the real API refuses an image it cannot read
    width, height = size
    scale = min(1.0, ANTHROPIC_LONG_EDGE / max(width, height), math.sqrt(ANTHROPIC_MOST_PIXELS / (width * height)))
    return min(math.ceil(width * height * scale * scale / 750), ANTHROPIC_MOST_TOKENS)


def anthropic_block(block: dict) -> int:
    source = block.get("source") or {}
    if block.get("type") == "image":
        return anthropic_image(source)
    if block.get("type") == "document" and source.get("type") in ("base64", "url"):
        pages = pdf_pages(raw(source.get("data"))) if source.get("type") == "base64" else 1
        return pages * (ANTHROPIC_MOST_TOKENS + PDF_PAGE_TEXT_TOKENS)
    if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
        return sum(anthropic_block(inner) for inner in block["content"] if isinstance(inner, dict))
    return 0


def anthropic_media_tokens(messages: list) -> int:
    return sum(anthropic_block(block) for message in messages if isinstance(message, dict)
               and isinstance(message.get("content"), list)
               for block in message["content"] if isinstance(block, dict))


# -- Gemini -----------------------------------------------------------------------------------

def gemini_inline(mime_type: str, data: str) -> int:
    """Tokens of one inlineData part."""
    raw_bytes, kind = raw(data), mime_type.lower()
    if kind.startswith("image/"):
        size = image_size(raw_bytes)
        if size is None or (size[0] <= 384 and size[1] <= 384):
            return GEMINI_TOKENS
        return GEMINI_TOKENS * math.ceil(size[0] / 768) * math.ceil(size[1] / 768)
    if kind.startswith("audio/"):
        return math.ceil(audio_seconds(raw_bytes, kind) * GEMINI_AUDIO_PER_S)
    if kind.startswith("video/"):
        return math.ceil((audio_seconds(raw_bytes, "mp3") or UNKNOWN_VIDEO_S) * GEMINI_VIDEO_PER_S)
    if kind == "application/pdf":
        return GEMINI_TOKENS * pdf_pages(raw_bytes)
    return math.ceil(len(raw_bytes) / 4)
