"""The images of one sub-call: resolved from what a cell named, checked, and put into the request.

A request's user message carries them as OpenAI chat content parts (`image_url` with a base64 data URL),
the form the OpenAI-compatible endpoints and LiteLLM take as it is; the Anthropic client turns each part
into its own `image` block (`rlmx.lm.anthropic`). The bytes live only there, in the host: the trace gets
a text form (`content_text`: names and sizes), and the estimate counts image tokens, never base64 text.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rlmx.images.probe import HEAD_BYTES, ImageInfo, probe
from rlmx.images.tokens import image_tokens
from rlmx.images.vision import ImageRefused, caps_for, check_caps, check_sees

READ_LIMIT = 64 * 1024 * 1024  # a file longer than this is refused before it is read whole


@dataclass(frozen=True)
class Picture:
    name: str  # the context's path, or "<bytes N>" for bytes a cell made
    data: bytes
    info: ImageInfo

    def describe(self) -> str:
        return f"{self.name} ({self.info.format}, {self.info.width}x{self.info.height}, {len(self.data):,} bytes)"


def _read(path: str, name: str) -> bytes:
    """A regular file's bytes (opened without blocking: a FIFO swapped in is refused, not waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise ImageRefused(f"image {name} cannot be read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ImageRefused(f"image {name} is not a regular file")
        os.set_blocking(fd, True)
        data = f.read(READ_LIMIT + 1)
    if len(data) > READ_LIMIT:
        raise ImageRefused(f"image {name} is larger than {READ_LIMIT:,} bytes; send a smaller version")
    return data


def resolve(items: Any, files: dict[str, str]) -> list[Picture]:
    """The pictures a cell named: `{"path"}` among `files` (the context's image files, by name and by
    absolute path: no other host file is ever opened) or bytes it made."""
    if not isinstance(items, list):
        raise ImageRefused("images must be a list of image documents, paths or bytes")
    pictures: list[Picture] = []
    for index, item in enumerate(items):
        if isinstance(item, bytes):
            name, data = f"<bytes {index}>", item
        elif isinstance(item, dict) and isinstance(item.get("path"), str):
            name = item["path"]
            path = files.get(name) or files.get(os.path.abspath(name))
            if path is None:
                raise ImageRefused(
                    f"image {name!r} is not an image file of this run's context; name an image document "
                    "of `context` (or its path), or pass the image's bytes"
                )
            data = _read(path, name)
        else:
            raise ImageRefused(f"images[{index}] is not an image document, a path or bytes")
        info = probe(data[:HEAD_BYTES])
        if info is None:
            raise ImageRefused(f"image {name} is not a PNG, JPEG, WebP or GIF whose size can be read")
        pictures.append(Picture(name, data, info))
    return pictures


def data_url(picture: Picture) -> str:
    return f"data:{picture.info.media_type};base64,{base64.b64encode(picture.data).decode('ascii')}"


def user_content(prompt: str, pictures: list[Picture], detail: str | None) -> list[dict[str, Any]]:
    """The user message's content: the prompt, then each image as an OpenAI `image_url` part."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
    for picture in pictures:
        url: dict[str, Any] = {"url": data_url(picture)}
        if detail is not None:
            url["detail"] = detail
        parts.append({"type": "image_url", "image_url": url})
    return parts


def prepare(
    lm: Any, prompt: str, images: Any, detail: Any, files: dict[str, str], *, catalog: bool | None = None
) -> tuple[Any, str]:
    """(the user message's content, its text for the trace) for one sub-call with images; raises
    `ImageRefused` before any request when the model cannot see them or a cap is broken."""
    check_sees(lm, catalog)
    if detail is not None and detail not in ("auto", "low", "high"):
        raise ImageRefused(f"detail must be auto, low or high, not {detail!r}")
    pictures = resolve(images, files)
    check_caps(caps_for(lm), [(p.name, len(p.data), p.info.width, p.info.height) for p in pictures])
    shown = "; ".join(p.describe() for p in pictures)
    return user_content(prompt, pictures, detail), f"{prompt}\n[images: {shown}]" if pictures else prompt


# --- reading a request's images back (the estimate, the trace) ----------------------------------------


def _split(url: str) -> tuple[str, str] | None:
    """(media type, base64 text) of a base64 data URL, or None."""
    head, _, body = url.partition(",")
    if not head.startswith("data:") or not head.endswith(";base64"):
        return None
    return head[5:-7], body


def decoded(url: str, limit: int | None = None) -> tuple[str, bytes] | None:
    """(media type, bytes) of a base64 data URL, or None; with `limit`, only about its first `limit`
    bytes are decoded (what the header probe reads), not the whole image."""
    split = _split(url)
    if split is None:
        return None
    media_type, body = split
    if limit is not None:
        body = body[: (limit + 2) // 3 * 4]
    try:
        return media_type, base64.b64decode(body, validate=False)
    except (binascii.Error, ValueError):
        return None


def _decoded_size(body: str) -> int:
    """The byte count a base64 text decodes to, without decoding it."""
    return len(body) * 3 // 4 - (2 if body.endswith("==") else 1 if body.endswith("=") else 0)


def image_parts(content: Any) -> Iterator[dict[str, Any]]:
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "image_url":
                yield part


def content_text(content: Any) -> str:
    """A message's content as text: its text parts, and "[image: media type, N bytes]" for each image."""
    if not isinstance(content, list):
        return str(content)
    out: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            out.append(str(part))
        elif part.get("type") == "text":
            out.append(str(part.get("text", "")))
        elif part.get("type") == "image_url":
            split = _split(str((part.get("image_url") or {}).get("url", "")))
            out.append(
                f"[image: {split[0]}, {_decoded_size(split[1]):,} bytes]" if split else "[image: a URL]"
            )
    return "\n".join(out)


def message_image_tokens(messages: list[dict[str, Any]], lm_name: str, lm: Any = None) -> int:
    """The worst-case tokens of every image in these messages, on this model."""
    total = 0
    for message in messages:
        for part in image_parts(message.get("content")):
            image_url = part.get("image_url") or {}
            found = decoded(str(image_url.get("url", "")), limit=HEAD_BYTES)
            info = probe(found[1]) if found else None
            width, height = (info.width, info.height) if info else (2048, 2048)
            total += image_tokens(lm_name, width, height, image_url.get("detail"), lm)
    return total
