"""Which models see images, and what one request may carry (host side).

Capability, in this order: the user's declaration (`ModelOptions.vision`, or a `vision` attribute on an
LM object); the price catalog, when it prices image input for the model; then the known model families
below (longest matching prefix of the model's own name). A
model known to be text-only, or one that is neither declared nor known, is refused before any request.

Caps are each provider's documented limits (sources in docs/images.md): Anthropic 5 MB and 8,000 px a
side per image (2,000 px when a request has more than 20), 100 images a request; OpenAI 50 MB a request,
500 images; Gemini's OpenAI-compatible endpoint 20 MB inline a request, 3,600 images. Any other
OpenAI-compatible server gets OpenAI's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlmx.errors import RLMError

MB = 1024 * 1024

# model-name prefix -> sees images; the longest prefix that matches wins (o3 sees, o3-mini does not)
FAMILIES: dict[str, bool] = {
    **dict.fromkeys(
        "gpt-4o chatgpt-4o gpt-4-turbo gpt-4.1 gpt-4.5 gpt-5 o1 o3 o4-mini claude-3 claude-opus-4 "
        "claude-sonnet-4 claude-haiku-4 claude-4 gemini gemma-3 llava bakllava pixtral qwen-vl qwen2-vl "
        "qwen2.5-vl qwen3-vl llama-3.2-11b-vision llama-3.2-90b-vision llama3.2-vision llama-4 "
        "grok-2-vision grok-4 minicpm-v moondream internvl phi-3.5-vision phi-4-multimodal "
        "mistral-small-3.1 mistral-medium-3".split(),
        True,
    ),
    **dict.fromkeys(
        "gpt-3.5 gpt-4 o1-mini o1-preview o3-mini claude-2 claude-instant deepseek "
        "qwen3-coder qwen2.5-coder qwen3 qwen2.5 smollm llama-3 llama3 mixtral mistral codestral gpt-oss "
        "phi-3 phi-4".split(),
        False,
    ),
}


class ImageRefused(RLMError):
    """A sub-call's images cannot be sent: the model cannot see them, or they break a cap."""


def model_id(name: str) -> str:
    """The model's own name: "openrouter:openai/gpt-4o" -> "gpt-4o"."""
    return name.lower().split(":", 1)[-1].split("/")[-1]


def declared(lm: Any) -> bool | None:
    """The user's declaration on an LM or one it wraps (`inner`), or None."""
    for _ in range(8):
        value = getattr(lm, "vision", None)
        if isinstance(value, bool):
            return value
        lm = getattr(lm, "inner", None)
        if lm is None:
            return None
    return None


def family_sees(name: str) -> bool | None:
    model = model_id(name)
    best = max((p for p in FAMILIES if model.startswith(p)), key=len, default=None)
    return None if best is None else FAMILIES[best]


def check_sees(lm: Any, catalog: bool | None = None) -> None:
    """Raise `ImageRefused` unless `lm` is declared or known to see images (`catalog`: True when the
    price catalog prices image input for it, `rlmx.pricing.catalog_sees_images`)."""
    said = declared(lm)
    known = said if said is not None else (catalog or family_sees(lm.name))
    if known is True:
        return
    if known is False:
        how = "it is declared text-only" if said is False else "it is a text-only model"
        raise ImageRefused(
            f"images cannot be sent to {lm.name}: {how}; pass model= a vision model of this run, "
            "or call without images"
        )
    raise ImageRefused(
        f"images cannot be sent to {lm.name}: rlmx does not know whether it sees images; declare it with "
        "vision=True in its model options (ModelOptions(vision=True)) if it does"
    )


@dataclass(frozen=True)
class Caps:
    provider: str
    max_image_bytes: int
    max_side_px: int
    max_request_bytes: int
    max_images: int
    many_images: int = 0  # past this many images in one request, `many_side_px` applies
    many_side_px: int = 0


ANTHROPIC = Caps("Anthropic", 5 * MB, 8000, 32 * MB, 100, many_images=20, many_side_px=2000)
OPENAI = Caps("OpenAI", 50 * MB, 0, 50 * MB, 500)
GEMINI = Caps("Gemini", 20 * MB, 0, 20 * MB, 3600)


def provider_of(lm: Any) -> str:
    """ "anthropic", "gemini" or "openai" (any OpenAI-compatible endpoint, LiteLLM's included)."""
    name = str(lm.name).lower()
    kind = type(getattr(lm, "inner", lm)).__name__
    if kind == "AnthropicLM" or name.startswith("anthropic:") or model_id(name).startswith("claude"):
        return "anthropic"
    if name.startswith("gemini:") or model_id(name).startswith("gemini"):
        return "gemini"
    return "openai"


def caps_for(lm: Any) -> Caps:
    return {"anthropic": ANTHROPIC, "gemini": GEMINI}.get(provider_of(lm), OPENAI)


def check_caps(caps: Caps, sizes: list[tuple[str, int, int, int]]) -> None:
    """`sizes`: (name, bytes, width, height) of one request's images; `ImageRefused` on the first cap broken."""
    if len(sizes) > caps.max_images:
        raise ImageRefused(
            f"{len(sizes)} images in one call; {caps.provider} takes at most {caps.max_images}: send fewer"
        )
    side = caps.many_side_px if caps.many_images and len(sizes) > caps.many_images else caps.max_side_px
    total = 0
    for name, n, width, height in sizes:
        total += n
        if n > caps.max_image_bytes:
            raise ImageRefused(
                f"image {name} is {n:,} bytes; {caps.provider} takes at most {caps.max_image_bytes:,} an "
                "image: send a smaller version (e.g. resized with Pillow)"
            )
        if side and max(width, height) > side:
            raise ImageRefused(
                f"image {name} is {width}x{height} px; {caps.provider} takes at most {side:,} px a side "
                f"here: send a resized version"
            )
    if total > caps.max_request_bytes:
        raise ImageRefused(
            f"the images of one call add up to {total:,} bytes; {caps.provider} takes at most "
            f"{caps.max_request_bytes:,} a request: send fewer or smaller ones"
        )
