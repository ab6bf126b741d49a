"""The `images=` argument of a cell's `llm_query`, as it crosses the wire (worker side; standard library).

A cell names an image by an image document of the context (a dict with "path"), by a path among the
context's files (a str), or gives bytes it made (bytes, or an object with Pillow's `save`, sent as PNG).
On the wire each is `{"path": str}` or `{"attachment": "imageN"}`, the bytes following the RPC frame as
its named attachments: never base64 in JSON, never read by the worker from the host's disk.
"""

from __future__ import annotations

import io
from typing import Any

MAX_RPC_IMAGES = 256  # images one request may carry (all prompts of a batch together)
ATTACHMENT_NAMES = frozenset(f"image{i}" for i in range(MAX_RPC_IMAGES))
DETAILS = ("auto", "low", "high")


def wire_image(item: Any) -> dict[str, Any] | bytes:
    """One image as the worker sends it: a path reference, or the bytes (detached later)."""
    if isinstance(item, dict) and isinstance(item.get("path"), str):
        return {"path": item["path"]}
    if isinstance(item, str):
        return {"path": item}
    if isinstance(item, (bytes, bytearray, memoryview)):
        return bytes(item)
    if callable(getattr(item, "save", None)):  # a Pillow image: its PNG bytes
        out = io.BytesIO()
        item.save(out, format="PNG")
        return out.getvalue()
    raise TypeError(
        f"images: {type(item).__name__} is not an image; give an image document of the context, "
        "its path, or the bytes of a PNG, JPEG, WebP or GIF"
    )


def wire_images(images: Any) -> list[Any]:
    if images is None:
        return []
    if isinstance(images, (str, bytes, dict)) or not hasattr(images, "__iter__"):
        images = [images]
    return [wire_image(item) for item in images]


def check_detail(detail: Any) -> str | None:
    if detail is None or detail in DETAILS:
        return detail
    raise ValueError(f"detail must be one of {', '.join(DETAILS)} (or None), not {detail!r}")


def detach(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """`params` with every bytes value in its "images" replaced by an attachment reference, and the
    attachments by name."""
    attachments: dict[str, bytes] = {}

    def swap(value: Any) -> Any:
        if isinstance(value, bytes):
            if len(attachments) >= MAX_RPC_IMAGES:
                raise ValueError(f"too many images in one request (at most {MAX_RPC_IMAGES})")
            name = f"image{len(attachments)}"
            attachments[name] = value
            return {"attachment": name}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    if "images" not in params:
        return params, attachments
    return {**params, "images": swap(params["images"])}, attachments


def attach(params: dict[str, Any], attachments: dict[str, bytes]) -> dict[str, Any]:
    """The host's side of `detach`: attachment references back to bytes (an unknown name stays a dict,
    which the host refuses as no image). Every attachment must be referenced exactly once."""
    used: set[str] = set()

    def swap(value: Any) -> Any:
        if isinstance(value, dict) and set(value) == {"attachment"} and value["attachment"] in attachments:
            name = value["attachment"]
            if name in used:
                raise ValueError(f"attachment {name} referenced twice")
            used.add(name)
            return attachments[name]
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    if "images" not in params:
        if attachments:
            raise ValueError("attachments on a request with no images")
        return params
    out = {**params, "images": swap(params["images"])}
    if used != set(attachments):
        raise ValueError("an attachment no image refers to")
    return out
