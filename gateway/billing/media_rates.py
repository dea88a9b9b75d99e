"""What each provider bills for media, as data: the one place these constants live. Read by
gateway.billing.media, which applies them to what a request sends.

Sources (the providers' public documentation, as of 2025):
- OpenAI, "Images and vision", Calculating costs. Tile models: detail "low" costs the base
  tokens; otherwise the image is scaled to fit 2048x2048, then its shortest side to 768 px (never
  up), and each 512 px tile costs the tile tokens, plus the base. Patch models: 32x32 px patches
  (at most 1,536, the image scaled down to fit), times the model's multiplier; `detail` does not
  change them. Audio input: 1 token per 100 ms (Realtime and audio models' cost guides).
- Anthropic, "Vision": tokens = width x height / 750; an image whose long edge is over 1568 px or
  that is over ~1,600 tokens is scaled down first. The largest size its table lists (1:2,
  784x1568) is 1,639 tokens, so 1,640 is the most one image bills.
- Google, Gemini API "Understand and count tokens": an image of at most 384 px both ways is 258
  tokens; a larger one is cropped and scaled into 768x768 tiles of 258 tokens each; audio 32
  tokens a second; video 263 a second; a PDF page 258 tokens.
"""

from decimal import Decimal
from types import MappingProxyType

from msgspec import Struct


class Tiles(Struct, frozen=True):
    """OpenAI's tile rule: `base` tokens per image, `tile` more per 512 px tile."""

    base: int
    tile: int


class Patches(Struct, frozen=True):
    """OpenAI's patch rule: 32 px patches, at most 1,536, times `multiplier`."""

    multiplier: Decimal


OPENAI_TILE_PX, OPENAI_FIT_PX, OPENAI_SHORT_PX = 512, 2048, 768
OPENAI_MOST_TILES = 2 * 4  # 768 x 2048 at most once scaled: 2 x 4 tiles
OPENAI_PATCH_PX, OPENAI_MOST_PATCHES = 32, 1536
OPENAI_AUDIO_TOKENS_PER_S = 10
# By upstream model name; the longest name a model's name starts with wins (gpt-4o-mini before gpt-4o).
OPENAI_IMAGES: MappingProxyType[str, Tiles | Patches] = MappingProxyType({
    "gpt-4o-mini": Tiles(2833, 5667),  # the same image costs ~33x the tokens at ~1/17 the price
    "gpt-4o": Tiles(85, 170), "chatgpt-4o": Tiles(85, 170), "gpt-4-turbo": Tiles(85, 170),
    "gpt-4.1": Tiles(85, 170), "gpt-4.5": Tiles(85, 170),
    "gpt-4.1-mini": Patches(Decimal("1.62")), "gpt-4.1-nano": Patches(Decimal("2.46")),
    "gpt-5": Tiles(70, 140), "gpt-5-mini": Patches(Decimal("1.62")), "gpt-5-nano": Patches(Decimal("2.46")),
    "o1": Tiles(75, 150), "o3": Tiles(75, 150), "o4-mini": Patches(Decimal("1.72")),
    "computer-use-preview": Tiles(65, 129),
})

ANTHROPIC_PIXELS_PER_TOKEN = 750
ANTHROPIC_LONG_EDGE_PX = 1568
ANTHROPIC_MOST_IMAGE_TOKENS = 1640

GEMINI_SMALL_PX, GEMINI_TILE_PX, GEMINI_IMAGE_TOKENS = 384, 768, 258
GEMINI_AUDIO_TOKENS_PER_S = 32
GEMINI_PDF_PAGE_TOKENS = 258


def openai_image_rule(upstream_model: str) -> Tiles | Patches | None:
    """The image rule of an OpenAI model (by the longest known name its name starts with), None
    for a model the table does not know."""
    known = [name for name in OPENAI_IMAGES if upstream_model.startswith(name)]
    return OPENAI_IMAGES[max(known, key=len)] if known else None
