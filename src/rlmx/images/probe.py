"""What an image file is, from its first bytes alone: format and pixel size (standard library only).

Runs in the REPL worker (an image document's figures) and in the host (checking bytes before a sub-call);
the pixels are never decoded. PNG, JPEG, WebP and GIF are known; anything else is not an image here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

IMAGE_SUFFIXES = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".webp": "webp", ".gif": "gif"}
MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp", "gif": "image/gif"}
HEAD_BYTES = 256 * 1024  # a JPEG's size marker may follow large EXIF blocks; past this it is "unknown"
MAX_SIDE = 65_535  # the most a side can have in JPEG, GIF and WebP; a larger PNG side is taken for junk
UNREADABLE = "binary (not a readable PNG, JPEG, WebP or GIF)"  # why such a file is left out


@dataclass(frozen=True)
class ImageInfo:
    format: str  # png | jpeg | webp | gif
    width: int
    height: int

    @property
    def media_type(self) -> str:
        return MEDIA_TYPES[self.format]


def sniff_format(head: bytes) -> str | None:
    """The format the magic bytes say, or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    return None


def probe(head: bytes) -> ImageInfo | None:
    """Format and pixel size from the first bytes of a file (`HEAD_BYTES` suffice), or None when these
    bytes are not a PNG, JPEG, WebP or GIF whose size can be read."""
    fmt = sniff_format(head)
    try:
        size = _SIZE[fmt](head) if fmt else None
    except (struct.error, IndexError):
        return None
    if fmt is None or size is None or not (0 < size[0] <= MAX_SIDE and 0 < size[1] <= MAX_SIDE):
        return None
    return ImageInfo(fmt, size[0], size[1])


def _png(head: bytes) -> tuple[int, int] | None:
    if head[12:16] != b"IHDR":
        return None
    w, h = struct.unpack(">II", head[16:24])
    return int(w), int(h)


def _gif(head: bytes) -> tuple[int, int]:
    w, h = struct.unpack("<HH", head[6:10])
    return int(w), int(h)


def _webp(head: bytes) -> tuple[int, int] | None:
    chunk = head[12:16]
    if chunk == b"VP8X":
        w = int.from_bytes(head[24:27], "little") + 1
        h = int.from_bytes(head[27:30], "little") + 1
        return w, h
    if chunk == b"VP8L" and head[20] == 0x2F:
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", head[26:30])
        return int(w) & 0x3FFF, int(h) & 0x3FFF
    return None


_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


def _jpeg(head: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(head):
        if head[i] != 0xFF:
            return None
        marker = head[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = int.from_bytes(head[i + 2 : i + 4], "big")
        if marker in _SOF:
            h, w = struct.unpack(">HH", head[i + 5 : i + 9])
            return int(w), int(h)
        i += 2 + length
    return None


_SIZE = {"png": _png, "gif": _gif, "webp": _webp, "jpeg": _jpeg}
