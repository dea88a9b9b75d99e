"""The most a provider can bill for each media part a request sends: images, audio, documents.

A media part is billed by what it shows or plays, not by its bytes: a URL of sixty bytes is an
image of hundreds or thousands of tokens. So `gateway.billing.ceilings.prompt_bound` counts the
parts found here at these bounds instead of their bytes. Each bound is the provider's rule
(`media_rates`) applied to what the part's own bytes tell (`media_sizes`): the real size of an
inline image, the longest an inline clip plays, a PDF's pages; where they tell nothing (a URL, a
file id, a format not read), the most the rule can give; where the rule has no most (a PDF's
text, a video, a model the table does not know), None: the caller counts the model's context.

Parts are found where the APIs put them: in the content of each message of a chat or Messages
body, each input item of a Responses body or of the conversation it continues, and in the content
of Anthropic tool results. The parts are the client's, before any translation: the adapters carry
media across unchanged (the detail hint aside, which only OpenAI reads), and the rule is the one
of the provider each model is sent to.
"""

import math
import re
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from types import MappingProxyType

from msgspec import Struct

from gateway.billing import media_rates as rates
from gateway.billing.media_sizes import HEADER_CHARS, audio_seconds, decoded, decoded_length, image_size, pdf_pages

_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)[^,]*?;base64,", re.ASCII)
KINDS = (("image/", "image"), ("audio/", "audio"), ("video/", "video"), ("application/pdf", "document"),
         ("text/", "text"))


class Media(Struct, frozen=True):
    """One media part: its kind (image, audio, video, document, text, other), its media type
    (or audio format), its base64 bytes when they travel inline, and OpenAI's detail hint."""

    kind: str
    mime: str = ""
    data: str | None = None
    detail: str | None = None

    def size(self) -> tuple[int, int] | None:
        """An inline image's width and height, when its header says."""
        head = decoded(self.data, HEADER_CHARS) if self.data else None
        return image_size(head) if head is not None else None

    def seconds(self) -> Fraction | None:
        """The longest inline audio plays, when its bytes say."""
        return audio_seconds(self.data, self.mime) if self.data else None


# -- where parts are ---------------------------------------------------------------------------

def parts(payload: object) -> Iterator[dict]:
    """The media parts of a body (chat, Messages, Responses), or of a list of bodies and of
    conversations (lists of messages or items)."""
    if isinstance(payload, dict):
        for key in ("messages", "input"):
            if isinstance(payload.get(key), list):
                yield from _in_messages(payload[key])
    elif isinstance(payload, list):
        for item in payload:
            yield from _in_messages(item) if isinstance(item, list) else parts(item)


def _in_messages(messages: list) -> Iterator[dict]:
    for message in messages:
        if isinstance(message, dict) and isinstance(message.get("content"), list):
            yield from _in_content(message["content"])


def _in_content(content: list) -> Iterator[dict]:
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "tool_result" and isinstance(part.get("content"), list):
            yield from _in_content(part["content"])
        elif media_of(part) is not None:
            yield part


# -- what a part is ----------------------------------------------------------------------------

def kind_of(mime: str) -> str:
    return next((kind for prefix, kind in KINDS if mime.lower().startswith(prefix)), "other")


def from_url(url: object, kind: str | None = None, detail: object = None) -> Media:
    """A part given by URL: inline when a base64 data URL (its kind from its type unless given)."""
    hint = detail if isinstance(detail, str) else None
    text = url if isinstance(url, str) else ""
    if (match := _DATA_URL.match(text)) is None:
        return Media(kind or "other", detail=hint)
    return Media(kind or kind_of(match[1]), match[1], text[match.end():], hint)


def _field(part: dict, name: str) -> dict:
    value = part.get(name)
    return value if isinstance(value, dict) else {}


def _image_url(part: dict) -> Media:  # chat: {"image_url": {"url", "detail"}} or {"image_url": "..."}
    image = part.get("image_url")
    return from_url(image.get("url"), "image", image.get("detail")) if isinstance(image, dict) \
        else from_url(image, "image")


def _audio(part: dict) -> Media:  # chat and Responses: {"input_audio": {"data", "format"}}
    audio = _field(part, "input_audio")
    data, fmt = audio.get("data"), audio.get("format")
    return Media("audio", fmt if isinstance(fmt, str) else "", data if isinstance(data, str) else None)


def _file(part: dict) -> Media:  # chat: {"file": {"file_data": "data:...", "file_id"}}
    return from_url(_field(part, "file").get("file_data"), None)


def _input_file(part: dict) -> Media:  # Responses: {"file_data": "data:...", "file_url", "file_id"}
    return from_url(part.get("file_data"), None)


def _anthropic(kind: str) -> Callable[[dict], Media | None]:
    """Messages image and document blocks; a document of plain text or content blocks is text."""
    def read(part: dict) -> Media | None:
        source = _field(part, "source")
        mime, data = source.get("media_type"), source.get("data")
        mime = mime if isinstance(mime, str) else ""
        if source.get("type") == "base64":
            return Media(kind_of(mime) if kind == "document" else kind, mime, data if isinstance(data, str) else None)
        return None if source.get("type") in ("text", "content") else Media(kind, mime)
    return read


READERS: Mapping[str, Callable[[dict], Media | None]] = MappingProxyType({
    "image_url": _image_url, "input_audio": _audio, "file": _file,
    "input_image": lambda part: from_url(part.get("image_url"), "image", part.get("detail")),
    "input_file": _input_file, "image": _anthropic("image"), "document": _anthropic("document"),
})


def media_of(part: dict) -> Media | None:
    """The media a content part carries, None for text and the rest."""
    kind = part.get("type")  # a client's body is any JSON until the route's own validation reads it
    reader = READERS.get(kind) if isinstance(kind, str) else None
    return reader(part) if reader is not None else None


# -- what a provider bills for it --------------------------------------------------------------

def ceil(value: Fraction) -> int:
    return math.ceil(value)


def openai(model: str, media: Media) -> int | None:
    if media.kind == "audio":
        seconds = media.seconds()
        return None if seconds is None else ceil(seconds * rates.OPENAI_AUDIO_TOKENS_PER_S)
    rule = rates.openai_image_rule(model) if media.kind == "image" else None
    if isinstance(rule, rates.Patches):
        return ceil(Fraction(openai_patches(media.size())) * Fraction(rule.multiplier))
    if rule is None:
        return None  # a PDF (its text is not bounded by its bytes), a video, an unknown model
    if media.detail == "low":
        return rule.base
    return rule.base + rule.tile * openai_tiles(media.size())


def openai_tiles(size: tuple[int, int] | None) -> int:
    """512 px tiles of an image once fit into 2048 px and its shortest side into 768 px (never
    scaled up); for an image of unknown size, the most there can be."""
    if size is None:
        return rates.OPENAI_MOST_TILES
    width, height = Fraction(size[0]), Fraction(size[1])
    for most, side in ((rates.OPENAI_FIT_PX, max), (rates.OPENAI_SHORT_PX, min)):
        scale = min(Fraction(1), most / side(width, height))
        width, height = width * scale, height * scale
    return ceil(width / rates.OPENAI_TILE_PX) * ceil(height / rates.OPENAI_TILE_PX)


def openai_patches(size: tuple[int, int] | None) -> int:
    """32 px patches covering an image, at most 1,536 (larger images are scaled down to fit)."""
    if size is None:
        return rates.OPENAI_MOST_PATCHES
    side = rates.OPENAI_PATCH_PX
    return min(-(-size[0] // side) * -(-size[1] // side), rates.OPENAI_MOST_PATCHES)


def anthropic(model: str, media: Media) -> int | None:
    """Images: width x height / 750 once the long edge fits 1568 px, at most 1,640."""
    if media.kind != "image":
        return None  # a PDF: its text is not bounded by its bytes
    size = media.size()
    if size is None:
        return rates.ANTHROPIC_MOST_IMAGE_TOKENS
    scale = min(Fraction(1), Fraction(rates.ANTHROPIC_LONG_EDGE_PX, max(size)))
    tokens = ceil(size[0] * size[1] * scale * scale / rates.ANTHROPIC_PIXELS_PER_TOKEN)
    return min(tokens, rates.ANTHROPIC_MOST_IMAGE_TOKENS)


def google(model: str, media: Media) -> int | None:
    if media.kind == "image":
        size = media.size()
        return None if size is None else rates.GEMINI_IMAGE_TOKENS * gemini_tiles(*size)
    if media.kind == "audio":
        seconds = media.seconds()
        return None if seconds is None else ceil(seconds * rates.GEMINI_AUDIO_TOKENS_PER_S)
    if media.kind == "document" and media.data:
        pages = pdf_pages(decoded(media.data) or b"")
        return None if pages is None else pages * rates.GEMINI_PDF_PAGE_TOKENS
    if media.kind == "text" and media.data:
        return decoded_length(media.data)  # read as text: a token covers at least a byte
    return None  # a video, by URL or of a type not read


def gemini_tiles(width: int, height: int) -> int:
    """One tile for a small image; else 768 px tiles, or tiles two thirds of its shorter side
    wide when that crop makes more (both readings of the rule are published: the larger holds)."""
    if width <= rates.GEMINI_SMALL_PX and height <= rates.GEMINI_SMALL_PX:
        return 1
    tile, crop = rates.GEMINI_TILE_PX, max(1, min(width, height) * 2 // 3)
    return max(-(-width // tile) * -(-height // tile), -(-width // crop) * -(-height // crop))


def bedrock(model: str, media: Media) -> int | None:
    """Claude on Bedrock bills media as Anthropic does; other Bedrock models count a context."""
    return anthropic(model, media) if "anthropic." in model else None


def vertex(model: str, media: Media) -> int | None:
    """Vertex serves Claude (ids starting `claude`, billed as Anthropic) and Gemini."""
    return anthropic(model, media) if model.startswith("claude") else google(model, media)


RULES: Mapping[str, Callable[[str, Media], int | None]] = MappingProxyType(
    {"openai": openai, "azure": openai, "anthropic": anthropic, "google": google, "bedrock": bedrock,
     "vertex": vertex})


def bound(protocol: str | None, upstream_model: str, part: dict) -> int | None:
    """The most a provider speaking `protocol` bills for `part` sent to `upstream_model`; None
    when that cannot be bounded (the caller counts a context)."""
    media, rule = media_of(part), RULES.get(protocol or "")
    return rule(upstream_model, media) if media is not None and rule is not None else None
