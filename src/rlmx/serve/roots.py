"""File paths from remote callers, confined to the directories the operator allowed.

A path is refused when it has a `..` part, when it (or any file found under it) resolves outside every
allowed root (symlinks are followed before the check, so a link cannot escape), or when the context would
grow beyond a byte limit. Relative paths are looked up under each root in turn.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from rlmx.errors import ConfigError, EmptyContext, RLMError
from rlmx.images.probe import IMAGE_SUFFIXES


class PathRefused(RLMError):
    """A caller's path is malformed (400), outside the roots (403), missing (404) or too big (413)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _inside(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


@dataclass(frozen=True)
class Roots:
    """The directories remote callers may read. Empty: no file access at all.

    `dirs` are where relative paths are looked up; `limit`, when narrowed by a client's own roots, is
    what may actually be read (by default: all of `dirs`)."""

    dirs: tuple[Path, ...] = ()
    limit: tuple[Path, ...] | None = None

    @property
    def allowed(self) -> tuple[Path, ...]:
        return self.dirs if self.limit is None else self.limit

    @classmethod
    def of(cls, dirs: Iterable[str | Path]) -> Roots:
        resolved = []
        for item in dirs:
            path = Path(item).expanduser()
            if not path.is_dir():
                raise ConfigError(f"`root` {item}: not a directory; give an existing folder callers may read")
            resolved.append(path.resolve())
        return cls(tuple(resolved))

    def narrowed(self, client_dirs: Iterable[Path]) -> Roots:
        """The part of these roots that also lies inside one of `client_dirs` (MCP client roots);
        relative paths are still looked up under the original roots."""
        client = [Path(os.path.realpath(d)) for d in client_dirs]
        kept: list[Path] = []
        for root in self.allowed:
            if _inside(root, client):
                kept.append(root)
            kept.extend(c for c in client if c != root and c.is_relative_to(root))
        return Roots(self.dirs, tuple(dict.fromkeys(kept)))

    def resolve(self, spec: str) -> Path:
        """The real path of `spec`, or PathRefused."""
        if not isinstance(spec, str) or not spec.strip() or "\x00" in spec:
            raise PathRefused("a path must be a non-empty string", 400)
        if not self.dirs:
            raise PathRefused(
                "file paths are disabled on this server: it was started without `root` folders", 403
            )
        if ".." in PurePath(spec).parts:
            raise PathRefused(f"path {spec!r} has a '..' part; give a path inside an allowed root", 400)
        given = Path(spec).expanduser()
        candidates = [given] if given.is_absolute() else [root / given for root in self.dirs]
        for candidate in candidates:
            real = Path(os.path.realpath(candidate))
            if not _inside(real, self.allowed):
                if candidate.is_symlink() or real != candidate:
                    raise PathRefused(f"path {spec!r} resolves outside the allowed roots", 403)
                raise PathRefused(f"path {spec!r} is outside the allowed roots", 403)
            if real.exists():
                return real
        raise PathRefused(f"path {spec!r} was not found under the allowed roots", 404)

    def load(
        self, specs: list[str], *, max_bytes: int, images: list[tuple[str, Path]] | None = None
    ) -> list[dict[str, Any]]:
        """Documents ({"path", "text"}) for the given files and folders, confined and size-limited. With
        `images` (a list to fill), image files are not read but listed there, (name, real path), for
        the run's context to hold as image documents."""
        budget = _Budget(max_bytes)
        docs: list[dict[str, Any]] = []
        for spec in specs:
            real = self.resolve(spec)
            if real.is_dir():
                docs.extend(self._folder(real, spec.rstrip("/") or spec, budget, images))
            elif _image(real, spec, images):
                continue
            else:
                text = _read_text(real, budget)
                if text is None:
                    raise PathRefused(f"path {spec!r} is a binary file; give text files or folders", 400)
                docs.append({"path": spec, "text": text})
        return docs

    def _folder(
        self, folder: Path, label: str, budget: _Budget, images: list[tuple[str, Path]] | None = None
    ) -> list[dict[str, Any]]:
        docs: list[dict[str, Any]] = []
        for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name.startswith("."):
                    continue
                path = Path(dirpath) / name
                real = Path(os.path.realpath(path))
                if not _inside(real, self.allowed) or not real.is_file():
                    continue  # a link out of the roots (or to something that is not a file) is not read
                if _image(real, f"{label}/{path.relative_to(folder)}", images):
                    continue
                text = _read_text(real, budget)
                if text is not None:
                    docs.append({"path": f"{label}/{path.relative_to(folder)}", "text": text})
        return docs


def _image(real: Path, name: str, images: list[tuple[str, Path]] | None) -> bool:
    """Whether `real` is an image file, then listed in `images` (when the caller takes images)."""
    if images is None or real.suffix.lower() not in IMAGE_SUFFIXES:
        return False
    from rlmx.context.formats import sniff_file

    if sniff_file(str(real), "image") is not None:
        return False
    images.append((name, real))
    return True


class _Budget:
    def __init__(self, max_bytes: int) -> None:
        self.left = max_bytes
        self.limit = max_bytes

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise PathRefused(
                f"the files given add up to more than the server's context limit of {self.limit:,} bytes", 413
            )


def _read_text(path: Path, budget: _Budget) -> str | None:
    """The file's text (None for a binary file), charged against the budget."""
    try:
        budget.take(path.stat().st_size)
        data = path.read_bytes()
    except OSError as exc:
        raise PathRefused(f"cannot read {path.name}: {exc.strerror or exc}", 403) from exc
    if b"\x00" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def usable_context(docs: list[dict[str, Any]], *, given: list[str]) -> Any:
    """`as_context(docs)`, refused with EmptyContext when the caller gave a context (`given`: the names of
    its message parts, inline texts and paths) and none of it holds text: empty or blank files and texts,
    a folder of binary or hidden files. Checked here, with the caller's names, because the server reads
    the files itself: the engine would see only the texts, or nothing at all."""
    if not given or any(doc["text"].strip() for doc in docs):
        return as_context(docs)
    names = ", ".join(given[:5]) + (f" and {len(given) - 5} more" if len(given) > 5 else "")
    why = (
        "every file and text in it is empty or only whitespace"
        if docs
        else "no text file was found (binary, hidden and empty files are skipped)"
    )
    raise EmptyContext(f"the context ({names}) holds no usable text: {why}; name files with text in them")


def as_context(docs: list[dict[str, Any]]) -> Any:
    """One document gives its text; several give the list of documents; none gives None."""
    if not docs:
        return None
    if len(docs) == 1:
        return docs[0]["text"]
    return docs
