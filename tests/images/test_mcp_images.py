"""`rlmx mcp`'s `ask`: image paths under its roots become image documents (and only under them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from images.support import picture_folder
from rlmx.context.payload import load_payload
from rlmx.images.parts import resolve
from rlmx.mcp_server import McpSettings, RlmxTools
from rlmx.serve.roots import PathRefused, Roots


def test_ask_takes_image_paths_under_its_roots(tmp_path: Path) -> None:
    root = tmp_path / "root"
    files = picture_folder(root / "pics")
    (root / "pics" / "notes.txt").write_text("two receipts")
    (tmp_path / "outside.png").write_bytes(files["icon.webp"])
    tools = RlmxTools(McpSettings(profiles={}, roots=Roots.of([root])))
    context = tools.load(tools.settings.roots, ["pics", "pics/icon.webp"], None)
    docs = load_payload(context.payload()).value
    images = {d["path"]: d["image"] for d in docs if "image" in d}
    assert set(images) == {
        "pics/anim.gif",
        "pics/icon.webp",
        "pics/scans/photo.jpg",
        "pics/scans/receipt.png",
    }
    assert images["pics/scans/photo.jpg"] == {
        "format": "jpeg",
        "width": 300,
        "height": 200,
        "bytes": len(files["scans/photo.jpg"]),
    }
    assert {"path": "pics/notes.txt", "text": "two receipts"} in docs
    from rlmx.engine.subcalls import image_files

    (picture,) = resolve([{"path": "pics/scans/receipt.png"}], image_files(context.payload()))
    assert picture.data == files["scans/receipt.png"]
    with pytest.raises(PathRefused, match="outside the allowed roots"):
        tools.load(tools.settings.roots, [str(tmp_path / "outside.png")], None)
