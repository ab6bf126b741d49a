"""Turning what a user points at (text, files, folders, stdin) into the `context` value."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rlmx.errors import ConfigError


def read_text_file(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read context file {path}: {exc.strerror or exc}") from exc
    return data.decode("utf-8", errors="replace")


def load_folder(root: Path) -> list[dict[str, Any]]:
    docs = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if any(part.startswith(".") for part in path.relative_to(root).parts):
            continue
        data = path.read_bytes()
        if b"\x00" in data[:8192]:
            continue  # binary
        docs.append({"path": str(path.relative_to(root)), "text": data.decode("utf-8", errors="replace")})
    return docs


def load_one(spec: str) -> Any:
    if spec == "-":
        return sys.stdin.read()
    path = Path(spec).expanduser()
    if not path.exists():
        raise ConfigError(f"context path not found: {spec}")
    if path.is_dir():
        return load_folder(path)
    return read_text_file(path)


def load_contexts(specs: list[str]) -> Any:
    """One input gives its value (a str for a file or stdin); several give a list; folders give documents."""
    if not specs:
        return None
    values = [load_one(spec) for spec in specs]
    if len(values) == 1:
        return values[0]
    out: list[Any] = []
    for spec, value in zip(specs, values, strict=True):
        if isinstance(value, list):
            out.extend(value)
        else:
            out.append({"path": spec, "text": value} if spec != "-" else value)
    return out
