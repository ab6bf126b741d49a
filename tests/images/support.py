"""Pictures for the image tests, made with Pillow (a dev dependency: the images extra)."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image


def picture(fmt: str, size: tuple[int, int], color: str = "red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format=fmt)
    return out.getvalue()


def picture_folder(root: Path) -> dict[str, bytes]:
    """A folder of only images (PNG, JPEG, WebP, GIF); name -> the file's exact bytes."""
    files = {
        "scans/receipt.png": picture("PNG", (640, 480), "red"),
        "scans/photo.jpg": picture("JPEG", (300, 200), "blue"),
        "icon.webp": picture("WEBP", (120, 90), "green"),
        "anim.gif": picture("GIF", (33, 44), "white"),
    }
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files
