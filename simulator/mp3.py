"""Real MP3 bytes without an encoder: MPEG-1 Layer III streams of silent frames, and a frame walker.

What `silent_mp3` writes (constant bitrate, mono, no CRC)::

    [ID3v2.4 tag: one TXXX frame per tag field]   (only when fields are given)
    frame 0, frame 1, ...                            each = 4-byte header + zeroed side info
                                                      and main data (digital silence)

Every frame holds SAMPLES_PER_FRAME samples at SAMPLE_RATE. A frame is
144 * BITRATE / SAMPLE_RATE = 208.98 bytes on average, so it is 208 bytes or, with the
padding bit set, 209: frame i is padded exactly when the running byte count
``(i + 1) * 144 * BITRATE // SAMPLE_RATE`` needs it, which keeps the stream at the exact
average bitrate. The pattern repeats every CYCLE_FRAMES frames (exactly CYCLE_BYTES bytes);
that cycle is encoded once at import, so building a long stream is a bytes repetition.

`mp3_duration_s` is the proof a decoder would accept the bytes: it skips an ID3v2 tag and
walks frame header to frame header (any MPEG version, Layer III), summing frame durations.
"""

from collections.abc import Iterator
from math import fsum, gcd

import msgspec

SAMPLE_RATE = 44_100
BITRATE = 64_000
SAMPLES_PER_FRAME = 1152
FRAME_DURATION_S = SAMPLES_PER_FRAME / SAMPLE_RATE  # 26.12 ms
_SLOT_BYTES = 144 * BITRATE  # frame length * SAMPLE_RATE: 144 = 1152 samples / 8 bits
FRAME_BYTES = _SLOT_BYTES // SAMPLE_RATE  # 208; a padded frame is one byte longer
CYCLE_FRAMES = SAMPLE_RATE // gcd(_SLOT_BYTES, SAMPLE_RATE)  # 49
CYCLE_BYTES = CYCLE_FRAMES * _SLOT_BYTES // SAMPLE_RATE  # 10240, no remainder

# Header: sync 0x7FF, MPEG-1, Layer III, no CRC | bitrate index 5 (64 kbps), 44.1 kHz, padding bit
# (0x02), private 0 | mono, no mode extension, not copyrighted, original, no emphasis.
_HEADER_BYTES_0_1 = b"\xff\xfb"
_HEADER_BYTE_2 = 0x50
_PADDING_BIT = 0x02
_HEADER_BYTE_3 = 0xC4

ID3_HEADER_BYTES = 10
_ID3_FOOTER_FLAG = 0x10

# Layer III bitrates in kbps by header index (0 = free format, 15 = invalid: both unsupported).
_BITRATES_V1 = (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0)
_BITRATES_V2 = (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0)
_SAMPLE_RATES_V1 = (44_100, 48_000, 32_000)
# Indexed by the header's version bits: (name, sample-rate divisor); 0b01 is reserved.
_VERSIONS = (("MPEG-2.5", 4), None, ("MPEG-2", 2), ("MPEG-1", 1))


class FrameHeader(msgspec.Struct, frozen=True):
    """The decoded 4-byte header of one Layer III frame; `length` includes the header."""

    version: str
    bitrate: int
    sample_rate: int
    padded: bool
    channels: int
    length: int
    samples: int

    @property
    def duration_s(self) -> float:
        """Seconds of audio this frame holds."""
        return self.samples / self.sample_rate


def frame_length(index: int) -> int:
    """Bytes of frame `index` of a `silent_mp3` stream (208, or 209 when padded)."""
    return stream_bytes(index + 1) - stream_bytes(index)


def stream_bytes(frames: int) -> int:
    """Bytes of the first `frames` frames of a `silent_mp3` stream (ID3 tag not counted)."""
    return frames * _SLOT_BYTES // SAMPLE_RATE


def frames_for(seconds: float) -> int:
    """The whole number of frames closest to `seconds` of audio."""
    return round(seconds / FRAME_DURATION_S)


def _silent_frame(length: int) -> bytes:
    """One silent frame of `length` bytes: its header, then zeros (side info and main data)."""
    padding = _PADDING_BIT if length > FRAME_BYTES else 0
    header = _HEADER_BYTES_0_1 + bytes((_HEADER_BYTE_2 | padding, _HEADER_BYTE_3))
    return header + bytes(length - len(header))


# Immutable, built once: every silent stream is repetitions of this cycle.
_CYCLE = b"".join(_silent_frame(frame_length(i)) for i in range(CYCLE_FRAMES))


def silent_frames(frames: int) -> bytes:
    """`frames` consecutive silent frames, padded so the stream keeps BITRATE exactly."""
    cycles, rest = divmod(frames, CYCLE_FRAMES)
    return _CYCLE * cycles + _CYCLE[: stream_bytes(rest)]


def silent_mp3(seconds: float, tag_fields: dict[str, str] | None = None) -> bytes:
    """An MP3 of silence lasting the whole frames closest to `seconds`, led by an ID3v2
    tag holding `tag_fields` (one TXXX frame each) when any are given."""
    tag = id3_tag(tag_fields) if tag_fields else b""
    return tag + silent_frames(frames_for(seconds))


def id3_tag(fields: dict[str, str]) -> bytes:
    """An ID3v2.4 tag with one user-defined text frame (TXXX) per field, in order."""
    frames = b"".join(_txxx_frame(name, value) for name, value in fields.items())
    return b"ID3\x04\x00\x00" + _syncsafe(len(frames)) + frames


def _txxx_frame(description: str, value: str) -> bytes:
    payload = b"\x03" + description.encode() + b"\x00" + value.encode()  # 3 = UTF-8
    return b"TXXX" + _syncsafe(len(payload)) + b"\x00\x00" + payload


def _syncsafe(size: int) -> bytes:
    """`size` as ID3's 4-byte "syncsafe" integer (7 bits per byte)."""
    return bytes((size >> shift) & 0x7F for shift in (21, 14, 7, 0))


def _unsyncsafe(raw: bytes) -> int:
    value = 0
    for byte in raw:
        value = (value << 7) | (byte & 0x7F)
    return value


def audio_start(data: bytes) -> int:
    """Offset of the first audio frame: after a leading ID3v2 tag (and its footer), else 0."""
    if data[:3] != b"ID3" or len(data) < ID3_HEADER_BYTES:
        return 0
    footer = ID3_HEADER_BYTES if data[5] & _ID3_FOOTER_FLAG else 0
    return ID3_HEADER_BYTES + _unsyncsafe(data[6:10]) + footer


def parse_frame_header(header: bytes) -> FrameHeader:
    """Decode a Layer III frame header; ValueError when `header` is not one (or is free-format)."""
    if len(header) < 4 or header[0] != 0xFF or header[1] & 0xE0 != 0xE0:
        raise ValueError("no MPEG frame sync")
    version_bits, layer_bits = (header[1] >> 3) & 0b11, (header[1] >> 1) & 0b11
    version_entry = _VERSIONS[version_bits]
    if version_entry is None or layer_bits != 0b01:
        raise ValueError("not an MPEG Layer III frame header")
    version, divisor = version_entry
    bitrate_index, rate_index = header[2] >> 4, (header[2] >> 2) & 0b11
    kbps = (_BITRATES_V1 if divisor == 1 else _BITRATES_V2)[bitrate_index]
    if kbps == 0 or rate_index == 3:
        raise ValueError("unsupported bitrate or sample rate index")
    return _frame_header(version, kbps * 1000, _SAMPLE_RATES_V1[rate_index] // divisor, header)


def _frame_header(version: str, bitrate: int, sample_rate: int, header: bytes) -> FrameHeader:
    samples = SAMPLES_PER_FRAME if version == "MPEG-1" else SAMPLES_PER_FRAME // 2
    padded = bool(header[2] & _PADDING_BIT)
    length = samples // 8 * bitrate // sample_rate + padded
    channels = 1 if header[3] >> 6 == 0b11 else 2
    return FrameHeader(version, bitrate, sample_rate, padded, channels, length, samples)


def iter_frame_headers(data: bytes) -> Iterator[FrameHeader]:
    """The header of every frame of `data` in order (after an ID3v2 tag; an ID3v1 tag at the
    end is allowed); ValueError when the bytes are not wholly frames."""
    position, end = audio_start(data), len(data)
    if end - position >= 128 and data[end - 128 : end - 125] == b"TAG":
        end -= 128
    while position < end:
        header = parse_frame_header(data[position : position + 4])
        if position + header.length > end:
            raise ValueError(f"truncated frame at byte {position}")
        yield header
        position += header.length


def mp3_duration_s(data: bytes) -> float:
    """Seconds of audio in MP3 `data`: the sum of its frame durations; ValueError when `data`
    holds no frames or anything besides ID3 tags and whole Layer III frames."""
    headers = list(iter_frame_headers(data))
    if not headers:
        raise ValueError("no MPEG audio frames")
    return fsum(header.duration_s for header in headers)
