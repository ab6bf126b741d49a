"""Worst-case input tokens of one image, per model, for the estimate made before each call.

What is booked afterwards is the provider's own usage; these rules only bound the estimate (and so
`max_cost_usd` and the window check). Sources (docs/images.md lists them with dates):

- OpenAI tiles (gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o1, o3): fit in 2048x2048, shortest side to 768, 512 px
  tiles; base + tiles x per-tile tokens: 85 + 170 a tile (gpt-4o family), 2,833 + 5,667 (gpt-4o-mini:
  about 33x), 75 + 150 (o1, o3); `detail="low"` is the base alone.
- OpenAI patches (gpt-4.1-mini, gpt-4.1-nano, o4-mini, gpt-5-mini, gpt-5-nano): 32 px patches, at most
  1,536, times the model's multiplier.
- Anthropic: long side at most 1,568 px and about 1.15 megapixels after its resize, width x height / 750.
- Gemini: 258 a 768 px tile (258 for an image of 384 px or less a side).
- Any other model: the larger of the gpt-4o tile count at high detail and width x height / 750 without
  any resize (the stated upper-bound fallback).
"""

from __future__ import annotations

import math

from rlmx.images.vision import model_id, provider_of

# model prefix -> (base, per tile); the longest prefix wins
TILES: dict[str, tuple[int, int]] = {
    "gpt-4o": (85, 170),
    "chatgpt-4o": (85, 170),
    "gpt-4.1": (85, 170),
    "gpt-4.5": (85, 170),
    "gpt-5": (70, 140),
    "gpt-4o-mini": (2833, 5667),
    "o1": (75, 150),
    "o3": (75, 150),
}
# model prefix -> multiplier of the patch count
PATCHES: dict[str, float] = {
    "gpt-4.1-mini": 1.62,
    "gpt-4.1-nano": 2.46,
    "o4-mini": 1.72,
    "gpt-5-mini": 1.62,
    "gpt-5-nano": 2.46,
}


def _longest(table: dict[str, object], model: str) -> str | None:
    return max((p for p in table if model.startswith(p)), key=len, default=None)


def tile_count(width: int, height: int) -> int:
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return math.ceil(w / 512) * math.ceil(h / 512)


def patch_tokens(width: int, height: int, multiplier: float) -> int:
    patches = math.ceil(width / 32) * math.ceil(height / 32)
    if patches > 1536:  # shrunk to fit 1,536 patches, as OpenAI does
        shrink = math.sqrt(1536 * 32 * 32 / (width * height))
        w, h = width * shrink, height * shrink
        shrink *= min(math.floor(w / 32) / (w / 32), math.floor(h / 32) / (h / 32))
        patches = min(1536, math.ceil(width * shrink / 32) * math.ceil(height * shrink / 32))
    return math.ceil(patches * multiplier)


def anthropic_tokens(width: int, height: int) -> int:
    scale = min(1.0, 1568 / max(width, height), math.sqrt(1_150_000 / (width * height)))
    return math.ceil((width * scale) * (height * scale) / 750)


def gemini_tokens(width: int, height: int) -> int:
    if max(width, height) <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


def image_tokens(lm_name: str, width: int, height: int, detail: str | None = None, lm: object = None) -> int:
    """The most input tokens one `width` x `height` image may cost on this model."""
    model = model_id(lm_name)
    patch = _longest(dict(PATCHES), model)
    tile = _longest(dict(TILES), model)
    if patch is not None and (tile is None or len(patch) >= len(tile)):
        return patch_tokens(width, height, PATCHES[patch])
    if tile is not None:
        base, per_tile = TILES[tile]
        return base if detail == "low" else base + per_tile * tile_count(width, height)
    provider = provider_of(lm if lm is not None else _Named(lm_name))
    if provider == "anthropic":
        return anthropic_tokens(width, height)
    if provider == "gemini":
        return gemini_tokens(width, height)
    return fallback_tokens(width, height)


def fallback_tokens(width: int, height: int) -> int:
    return max(85 + 170 * tile_count(width, height), math.ceil(width * height / 750))


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name
