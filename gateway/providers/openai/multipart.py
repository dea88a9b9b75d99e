"""The multipart/form-data encoding of a form sent upstream, produced as the form arrives.

It lives among the adapters (gateway.audio.upload reads the client's form and imports from here,
never the other way), so importing either first loads no half-initialised module.
"""

import secrets
from collections.abc import AsyncIterator

from gateway.providers.base import FilePart, FormField

FILE_FIELD = "file"  # the part carrying the file, as OpenAI names it and clients send it


async def encode_form(parts: AsyncIterator[FormField | FilePart], boundary: str) -> AsyncIterator[bytes]:
    """`parts` as a multipart/form-data body with `boundary`, produced as the parts arrive."""
    async for part in parts:
        if isinstance(part, FormField):
            yield _part_head(boundary, part.name) + part.value.encode() + b"\r\n"
            continue
        yield _part_head(boundary, FILE_FIELD, part.filename, part.content_type)
        async for chunk in part.chunks:
            yield chunk
        yield b"\r\n"
    yield f"--{boundary}--\r\n".encode()


def new_boundary() -> str:
    return f"gateway-{secrets.token_hex(16)}"


def _part_head(boundary: str, name: str, filename: str | None = None, content_type: str = "") -> bytes:
    disposition = f'form-data; name="{_quoted(name)}"'
    if filename is not None:
        disposition += f'; filename="{_quoted(filename)}"'
    lines = [f"--{boundary}", f"Content-Disposition: {disposition}"]
    if content_type:
        lines.append(f"Content-Type: {content_type}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _quoted(text: str) -> str:
    """A header parameter value as browsers write it: quote and line breaks percent-encoded."""
    return text.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")
