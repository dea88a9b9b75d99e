"""What a media part's own bytes say about its size, read cheaply and never trusted further than
they go: an image's width and height from its header (PNG, JPEG, GIF, WebP), an audio clip's
longest possible duration (WAV from its header, MP3 from its length at the lowest bitrate MP3
has), a PDF's page count (only when every object is in plain sight). None whenever the bytes do
not tell: the caller then takes the most its provider could bill (gateway.billing.media).

Pure functions, no I/O. Base64 payloads are decoded only as far as needed: a prefix for headers,
the whole of a PDF (its page objects are anywhere in it).
"""

import base64
import binascii
import re
import struct
from fractions import Fraction

# The most of a base64 payload decoded to find an image's header: a JPEG's frame header follows
# its metadata segments (EXIF and ICC profiles of up to 64 KiB each, sometimes several).
HEADER_CHARS = 4 * 1024 * 1024
MP3_LOWEST_BITS_PER_S = 8_000  # MPEG-2.5 Layer III at 8 kbit/s, the format's lowest bitrate
# WAV codings whose bytes per second the header's rate, width and channels give exactly.
WAV_CODINGS = frozenset({1, 3, 6, 7, 0xFFFE})  # PCM, IEEE float, A-law, mu-law, extensible
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # SOFn, not DHT/JPG/DAC
_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")
_COUNT = re.compile(rb"/Count\s+(\d{1,9})")


def decoded(data: str, limit: int | None = None) -> bytes | None:
    """The bytes of base64 `data` (its first `limit` characters only, when given); None when it
    is not base64."""
    text = data if limit is None or len(data) <= limit else data[:limit - limit % 4]
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def decoded_length(data: str) -> int:
    """How many bytes base64 `data` holds, without decoding it."""
    return len(data) * 3 // 4 - len(data[-2:]) + len(data[-2:].rstrip("="))


def image_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG, GIF, WebP or JPEG image from its first bytes, else None."""
    for reader in (_png, _gif, _webp, _jpeg):
        if (size := reader(head)) is not None:
            return size if size[0] > 0 and size[1] > 0 else None
    return None


def _png(head: bytes) -> tuple[int, int] | None:
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR" or len(head) < 24:
        return None
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def _gif(head: bytes) -> tuple[int, int] | None:
    if head[:6] not in (b"GIF87a", b"GIF89a") or len(head) < 10:
        return None
    width, height = struct.unpack("<HH", head[6:10])
    return width, height


def _webp(head: bytes) -> tuple[int, int] | None:
    if head[:4] != b"RIFF" or head[8:12] != b"WEBP" or len(head) < 30:
        return None
    chunk = head[12:16]
    if chunk == b"VP8X":  # 24-bit canvas width and height, minus one
        return 1 + int.from_bytes(head[24:27], "little"), 1 + int.from_bytes(head[27:30], "little")
    if chunk == b"VP8L" and head[20] == 0x2F:  # 14-bit width and height, minus one
        bits = int.from_bytes(head[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":  # a key frame's 14-bit sizes
        width, height = struct.unpack("<HH", head[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


def _jpeg(head: bytes) -> tuple[int, int] | None:
    """The size in a JPEG's first frame header, walking its segments from the start."""
    if head[:2] != b"\xff\xd8":
        return None
    at = 2
    while at + 9 <= len(head):
        if head[at] != 0xFF:
            return None
        marker = head[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _JPEG_FRAMES:
            height, width = struct.unpack(">HH", head[at + 5:at + 9])
            return width, height
        at += 2 + struct.unpack(">H", head[at + 2:at + 4])[0]
    return None


def wav_seconds(head: bytes, length: int) -> Fraction | None:
    """The longest a WAV file of `length` bytes plays: every byte after its header at the
    slowest byte rate its header allows (the stated one, or rate x width x channels)."""
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    at = 12
    while at + 8 <= len(head):
        name, size = head[at:at + 4], struct.unpack("<I", head[at + 4:at + 8])[0]
        if name == b"fmt " and at + 24 <= len(head):
            return _wav_rate(head[at + 8:at + 24], length)
        at += 8 + size + size % 2
    return None


def _wav_rate(fmt: bytes, length: int) -> Fraction | None:
    coding, channels, rate, stated = struct.unpack("<HHII", fmt[:12])
    width = struct.unpack("<H", fmt[14:16])[0]
    computed = rate * channels * width // 8
    slowest = min(stated, computed)
    return Fraction(length, slowest) if coding in WAV_CODINGS and slowest > 0 else None


def mp3_seconds(length: int) -> Fraction:
    """The longest `length` bytes of MP3 can play: all of them at MP3's lowest bitrate."""
    return Fraction(length * 8, MP3_LOWEST_BITS_PER_S)


def audio_seconds(data: str, mime: str) -> Fraction | None:
    """The longest base64 audio `data` of type `mime` (or format: wav, mp3) can play, else None."""
    kind = mime.rsplit("/", 1)[-1].lower()
    if kind in ("mp3", "mpeg", "mpga"):
        return mp3_seconds(decoded_length(data))
    head = decoded(data, 4096)
    if kind in ("wav", "wave", "x-wav", "vnd.wave") and head is not None:
        return wav_seconds(head, decoded_length(data))
    return None


def pdf_pages(data: bytes) -> int | None:
    """How many pages a PDF has, when it says so in plain sight: every /Type /Page object and
    the largest /Count, whichever is more. None when objects may hide in compressed object
    streams (PDF 1.5) or none is found."""
    if not data.startswith(b"%PDF") or b"/ObjStm" in data:
        return None
    counts = [int(number) for number in _COUNT.findall(data)]
    pages = max(len(_PAGE.findall(data)), *counts, 0)
    return pages or None
