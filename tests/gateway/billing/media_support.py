"""Media for the ceiling tests: the smallest real files of each kind (an image's header with the
size it claims, a WAV of so many bytes, a real MP3 of so many seconds, a PDF of so many pages),
as data URLs and as each API's content parts, and hypothesis strategies over them."""

import base64
import struct
import zlib

from hypothesis import strategies as st

from simulator.mp3 import silent_mp3

DETAILS = (None, "low", "high", "auto", "bogus")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{b64(data)}"


def png(width: int, height: int) -> bytes:
    def chunk(name: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + name + body + struct.pack(">I", zlib.crc32(name + body))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0")) + chunk(b"IEND", b"")


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\0\0\0;"


def webp(width: int, height: int) -> bytes:
    body = b"VP8X" + struct.pack("<I", 10) + b"\0\0\0\0" + (width - 1).to_bytes(3, "little") \
        + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + body


def wav(seconds: float, rate: int = 8_000, channels: int = 1, width: int = 16) -> bytes:
    per_second = rate * channels * width // 8
    samples = b"\0" * int(seconds * per_second)
    fmt = struct.pack("<HHIIHH", 1, channels, rate, per_second, channels * width // 8, width)
    chunks = b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(samples)) + samples
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks


def pdf(pages: int) -> bytes:
    objects = b"".join(b"%d 0 obj << /Type /Page /Parent 1 0 R >> endobj\n" % (n + 2) for n in range(pages))
    return b"%PDF-1.4\n1 0 obj << /Type /Pages /Count " + str(pages).encode() + b" >> endobj\n" + objects + b"%%EOF"


IMAGE_WRITERS = {"image/png": png, "image/jpeg": jpeg, "image/gif": gif, "image/webp": webp}
SIDES = st.one_of(st.integers(1, 64), st.integers(1, 5000), st.sampled_from([384, 385, 512, 768, 769, 2048, 4096]))


@st.composite
def image_urls(draw) -> str:
    """An image as a chat or Responses client sends it: by URL, or inline of any size."""
    kind = draw(st.sampled_from([*IMAGE_WRITERS, "url", "garbage"]))
    if kind == "url":
        return "https://example.com/a.png"
    if kind == "garbage":
        return data_url("image/png", b"not an image")
    return data_url(kind, IMAGE_WRITERS[kind](draw(SIDES), draw(SIDES)))


AUDIO = st.one_of(st.tuples(st.just("wav"), st.floats(0.01, 20).map(wav)),
                  st.tuples(st.just("mp3"), st.floats(0.05, 20).map(silent_mp3)))
PAGES = st.integers(1, 12)


def chat_parts() -> st.SearchStrategy[dict]:
    """OpenAI chat content parts: text, images (with any detail), audio, PDFs."""
    image = st.builds(lambda url, detail: {"type": "image_url", "image_url": {"url": url, **(
        {"detail": detail} if detail else {})}}, image_urls(), st.sampled_from(DETAILS))
    audio = AUDIO.map(lambda clip: {"type": "input_audio", "input_audio": {"format": clip[0], "data": b64(clip[1])}})
    document = PAGES.map(lambda pages: {"type": "file", "file": {"file_data": data_url("application/pdf", pdf(pages)),
                                                                  "filename": "a.pdf"}})
    text = st.text(min_size=1, max_size=30).map(lambda text: {"type": "text", "text": text})
    return st.one_of(image, image, audio, document, text)


def responses_parts() -> st.SearchStrategy[dict]:
    image = st.builds(lambda url, detail: {"type": "input_image", "image_url": url, **(
        {"detail": detail} if detail else {})}, image_urls(), st.sampled_from(DETAILS))
    document = PAGES.map(lambda pages: {"type": "input_file", "filename": "a.pdf",
                                        "file_data": data_url("application/pdf", pdf(pages))})
    text = st.text(min_size=1, max_size=30).map(lambda text: {"type": "input_text", "text": text})
    return st.one_of(image, image, document, text)


@st.composite
def anthropic_blocks(draw) -> dict:
    """Messages content blocks: images inline or by URL, PDFs inline or by URL, text documents."""
    kind = draw(st.sampled_from(["image", "image", "image_url", "pdf", "pdf_url", "text_doc", "text"]))
    if kind == "image":
        mime = draw(st.sampled_from(list(IMAGE_WRITERS)))
        data = IMAGE_WRITERS[mime](draw(SIDES), draw(SIDES))
        return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": b64(data)}}
    if kind == "image_url":
        return {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    if kind == "pdf":
        data = b64(pdf(draw(PAGES)))
        return {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}}
    if kind == "pdf_url":
        return {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
    text = draw(st.text(min_size=1, max_size=30))
    if kind == "text_doc":
        return {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}}
    return {"type": "text", "text": text}
