"""Finding the files a context is made of: paths and folders, globs, .gitignore. Runs in the host.

The scan reads no file contents (only names, `stat` and .gitignore files); the REPL worker reads the
files later, once. What the scan leaves out (broken symlinks, FIFOs, unreadable folders) is recorded
with a reason and ends up in the metadata the model sees.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rlmx.context.formats import format_of
from rlmx.errors import ConfigError

STDIN_NAME = "<stdin>"


@dataclass(frozen=True)
class LoadOptions:
    """Which files of a folder are read. Globs use .gitignore syntax, relative to the folder given."""

    include: tuple[str, ...] = ()  # when given, only files matching one of these
    exclude: tuple[str, ...] = ()  # files and folders matching these are left out
    gitignore: bool = True  # respect .gitignore files (in the folder and up to its repository root)
    hidden: bool = False  # read dotfiles and dot-folders (.git is never read)


@dataclass(frozen=True)
class FileEntry:
    path: str  # absolute path, for the worker to open
    name: str  # the document's "path": relative to the folder given, or the path as given
    size: int  # bytes on disk
    fmt: str  # text | pdf | html | jsonl | csv | json


@dataclass
class Manifest:
    """What to load: files for the worker to read, and text the host already read (stdin, pipes)."""

    files: list[FileEntry] = field(default_factory=list)
    inline: list[dict[str, str]] = field(default_factory=list)  # {"path", "text"}
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, reason)
    single: bool = False  # one file was given: the context is its value, not a list of documents

    def to_json(self) -> dict[str, Any]:
        return {
            "files": [[f.path, f.name, f.size, f.fmt] for f in self.files],
            "inline": self.inline,
            "skipped": [list(s) for s in self.skipped],
            "single": self.single,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        return cls(
            files=[FileEntry(str(p), str(n), int(s), str(f)) for p, n, s, f in data.get("files", [])],
            inline=list(data.get("inline", [])),
            skipped=[(str(n), str(r)) for n, r in data.get("skipped", [])],
            single=bool(data.get("single", False)),
        )


def _spec(patterns: Iterable[str]) -> Any:
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(list(patterns))


def _gitignore_spec(path: Path) -> Any | None:
    import pathspec

    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


@dataclass
class _Level:
    """One .gitignore: entries under `strip` (a prefix of the scan-relative path) are matched as
    `prefix + rest`, so files of a sub-folder match patterns written relative to an outer folder."""

    strip: str
    prefix: str
    spec: Any


def _outer_gitignores(root: Path) -> list[_Level]:
    """The .gitignore files between the repository root holding `root` and `root`'s parent."""
    levels: list[_Level] = []
    rel = ""
    current = root
    if (root / ".git").exists():
        return []  # the folder is a repository's root: its own .gitignore is read by the walk
    for _ in range(64):
        parent = current.parent
        if parent == current:
            return []  # not inside a repository: outer .gitignore files do not apply
        rel = f"{current.name}/{rel}"
        current = parent
        spec = _gitignore_spec(current / ".gitignore")
        if spec is not None:
            levels.append(_Level("", rel, spec))
        if (current / ".git").exists():
            return levels[::-1]
    return []


def _ignored(rel: str, is_dir: bool, levels: list[_Level]) -> bool:
    for level in reversed(levels):  # the deepest .gitignore that has a say wins
        if not rel.startswith(level.strip):
            continue
        probe = level.prefix + rel[len(level.strip) :] + ("/" if is_dir else "")
        result = level.spec.check_file(probe)
        if result.include is not None:
            return bool(result.include)
    return False


class _Walker:
    def __init__(self, options: LoadOptions, manifest: Manifest) -> None:
        self.options = options
        self.manifest = manifest
        self.include = _spec(options.include) if options.include else None
        self.exclude = _spec(options.exclude) if options.exclude else None
        self.root_real = ""

    def walk(self, root: Path, name_prefix: str) -> None:
        self.root_real = os.path.realpath(root)
        levels = _outer_gitignores(root.resolve()) if self.options.gitignore else []
        self._walk_dir(root, "", levels, name_prefix)

    def _outside(self, path: str) -> bool:
        """A symlink pointing out of the folder (to ~/.ssh/id_rsa, say) is not followed."""
        target = os.path.realpath(path)
        return not target.startswith(self.root_real.rstrip(os.sep) + os.sep)

    def _walk_dir(self, folder: Path, rel_dir: str, levels: list[_Level], name_prefix: str) -> None:
        if self.options.gitignore:
            spec = _gitignore_spec(folder / ".gitignore")
            if spec is not None:
                levels = [*levels, _Level(rel_dir, "", spec)]
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            self.manifest.skipped.append(
                (name_prefix + rel_dir or ".", f"unreadable folder ({exc.strerror})")
            )
            return
        for entry in entries:
            rel = rel_dir + entry.name
            name = name_prefix + rel
            if entry.name == ".git" or (entry.name.startswith(".") and not self.options.hidden):
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                info = entry.stat(follow_symlinks=True)
            except OSError:
                self.manifest.skipped.append((name, "broken symlink" if entry.is_symlink() else "unreadable"))
                continue
            if is_dir or (entry.is_symlink() and stat.S_ISDIR(info.st_mode)):
                if self._excluded(rel, True, levels):
                    continue
                if entry.is_symlink():
                    self.manifest.skipped.append((name, "symlinked folder (not followed)"))
                    continue
                self._walk_dir(Path(entry.path), rel + "/", levels, name_prefix)
                continue
            if self._excluded(rel, False, levels) or (self.include and not self.include.match_file(rel)):
                continue
            if not stat.S_ISREG(info.st_mode):
                self.manifest.skipped.append((name, f"not a regular file ({_file_type(info.st_mode)})"))
                continue
            if entry.is_symlink() and self._outside(entry.path):
                self.manifest.skipped.append((name, "symlink out of the folder (not followed)"))
                continue
            self.manifest.files.append(
                FileEntry(os.path.abspath(entry.path), name, info.st_size, format_of(name))
            )

    def _excluded(self, rel: str, is_dir: bool, levels: list[_Level]) -> bool:
        if self.exclude is not None and self.exclude.match_file(rel + ("/" if is_dir else "")):
            return True
        return bool(levels) and _ignored(rel, is_dir, levels)


def _file_type(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"


def scan(
    specs: Sequence[str | os.PathLike[str]], options: LoadOptions | None = None, stdin: IO[str] | None = None
) -> Manifest:
    """List the files to load. A spec is a file, a folder, or "-" for standard input.

    Pipes and character devices named directly (`<(cmd)`, /dev/stdin) are read here, by the host, since
    the worker cannot reach them; everything else is left for the worker to read.
    """
    options = options or LoadOptions()
    manifest = Manifest()
    walker = _Walker(options, manifest)
    names = [str(s) for s in specs]
    many = len(names) > 1
    single_file = False
    for spec in names:
        if spec == "-":
            if any(doc["path"] == STDIN_NAME for doc in manifest.inline):
                raise ConfigError("standard input ('-') can be given as a context only once")
            manifest.inline.append({"path": STDIN_NAME, "text": (stdin or sys.stdin).read()})
            continue
        path = Path(spec).expanduser()
        try:
            info = path.stat()
        except FileNotFoundError:
            broken = " (a broken symlink)" if path.is_symlink() else ""
            raise ConfigError(f"context path not found: {spec}{broken}; check the path") from None
        except OSError as exc:
            raise ConfigError(f"cannot read context path {spec}: {exc.strerror}") from exc
        if stat.S_ISDIR(info.st_mode):
            prefix = path.resolve().name + "/" if many else ""
            walker.walk(path, prefix)
        elif stat.S_ISREG(info.st_mode):
            manifest.files.append(FileEntry(os.path.abspath(path), spec, info.st_size, format_of(spec)))
            single_file = not many
        else:
            manifest.inline.append({"path": spec, "text": _read_stream(path)})
    manifest.single = single_file
    return manifest


def _read_stream(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read context path {path}: {exc.strerror}") from exc
    from rlmx.context.decode import decode_bytes

    decoded = decode_bytes(data)
    if decoded.text is None:
        raise ConfigError(f"context path {path} does not hold text ({decoded.skip})")
    return decoded.text
