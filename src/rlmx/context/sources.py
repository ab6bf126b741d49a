"""Finding the files a context is made of: paths and folders, globs, .gitignore. Runs in the host.

The scan reads names, `stat` results, .gitignore files and the first few KiB of each file (to leave out
binary and empty files as the worker would); the REPL worker reads the files whole later, once. What the
scan leaves out (binary or empty files, broken symlinks, FIFOs, unreadable folders) is recorded with a
reason and ends up in the metadata the model sees; what the globs, .gitignore or the dotfile rule leave
out is only counted, for the message that explains an empty context.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rlmx.context.formats import file_type, format_of, open_regular, sniff_file
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
    # Left out on purpose, by rule ("--include", "--exclude", ".gitignore", "hidden"): files, or folders
    # not walked. Host-side only (not sent to the worker, not in the model's metadata).
    excluded: Counter[str] = field(default_factory=Counter)

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
    """The patterns of a .gitignore file, or None when there is none (or it is not a regular file: a
    FIFO named .gitignore must not block the scan)."""
    import pathspec

    if not os.path.lexists(path):
        return None
    f, _ = open_regular(str(path))
    if f is None:
        return None
    try:
        with f:
            lines = f.read().decode("utf-8", errors="replace").splitlines()
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
            if entry.name == ".git":
                continue
            if entry.name.startswith(".") and not self.options.hidden:
                self.manifest.excluded["hidden"] += 1
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                info = entry.stat(follow_symlinks=True)
            except OSError:
                self.manifest.skipped.append((name, "broken symlink" if entry.is_symlink() else "unreadable"))
                continue
            if is_dir or (entry.is_symlink() and stat.S_ISDIR(info.st_mode)):
                if rule := self._excluded(rel, True, levels):
                    self.manifest.excluded[rule] += 1
                    continue
                if entry.is_symlink():
                    self.manifest.skipped.append((name, "symlinked folder (not followed)"))
                    continue
                self._walk_dir(Path(entry.path), rel + "/", levels, name_prefix)
                continue
            rule = self._excluded(rel, False, levels)
            if rule is None and self.include is not None and not self.include.match_file(rel):
                rule = "include"
            if rule is not None:
                self.manifest.excluded[rule] += 1
                continue
            if not stat.S_ISREG(info.st_mode):  # never opened: a FIFO's open would wait for a writer
                self.manifest.skipped.append((name, f"not a regular file ({file_type(info.st_mode)})"))
                continue
            if entry.is_symlink() and self._outside(entry.path):
                self.manifest.skipped.append((name, "symlink out of the folder (not followed)"))
                continue
            _add_file(self.manifest, entry.path, name, info.st_size)

    def _excluded(self, rel: str, is_dir: bool, levels: list[_Level]) -> str | None:
        """The rule leaving this file or folder out ("exclude", ".gitignore"), or None."""
        if self.exclude is not None and self.exclude.match_file(rel + ("/" if is_dir else "")):
            return "exclude"
        if levels and _ignored(rel, is_dir, levels):
            return ".gitignore"
        return None


def _add_file(manifest: Manifest, path: str, name: str, size: int) -> None:
    """A file for the worker to read, or a skipped one when its first KiB show the worker would skip it."""
    fmt = format_of(name)
    reason = sniff_file(path, fmt)
    if reason is not None:
        manifest.skipped.append((name, reason))
    else:
        manifest.files.append(FileEntry(os.path.abspath(path), name, size, fmt))


def _add_text(manifest: Manifest, name: str, data: bytes | str) -> None:
    """Text the host read (stdin, a pipe): a document, or skipped when it is blank or not text."""
    if isinstance(data, bytes):
        from rlmx.context.decode import decode_bytes

        if not data or data.isspace():
            manifest.skipped.append((name, "empty"))
            return
        decoded = decode_bytes(data)
        if decoded.text is None:
            manifest.skipped.append((name, decoded.skip or "binary"))
            return
        data = decoded.text
    if not data or data.isspace():
        manifest.skipped.append((name, "empty"))
    else:
        manifest.inline.append({"path": name, "text": data})


@functools.cache
def _pipe_device() -> int:
    """The device number anonymous pipes live on (Linux: pipefs), to tell them from named FIFOs."""
    read_fd, write_fd = os.pipe()
    try:
        return os.fstat(read_fd).st_dev
    finally:
        os.close(read_fd)
        os.close(write_fd)


def _refuse_special(spec: str, info: os.stat_result) -> None:
    """A FIFO, socket or device named as a context path is refused at once, by name. An anonymous pipe
    (`<(cmd)`, /dev/fd/N, /dev/stdin fed by a pipe) is allowed: opening it never waits."""
    if stat.S_ISFIFO(info.st_mode) and info.st_dev == _pipe_device():
        return
    kind = file_type(info.st_mode)
    why = {
        "FIFO": "a FIFO (named pipe), not a file: reading it would wait for a writer",
        "socket": "a socket, not a file",
        "device": "a device, not a file",
    }.get(kind, f"a {kind}, not a file")
    raise ConfigError(f"context path {spec} is {why}; give a file or a folder, or pipe the data in with '-'")


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
    single_file = seen_stdin = False
    for spec in names:
        if spec == "-":
            if seen_stdin:
                raise ConfigError("standard input ('-') can be given as a context only once")
            seen_stdin = True
            _add_text(manifest, STDIN_NAME, _read_stdin(stdin))
            single_file = not many
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
            _add_file(manifest, str(path), spec, info.st_size)
            single_file = not many
        else:
            _refuse_special(spec, info)
            _add_text(manifest, spec, _read_stream(path))
            single_file = not many
    manifest.single = single_file
    return manifest


def _read_stdin(stdin: IO[str] | None) -> bytes | str:
    """Standard input, as bytes when it has them (then decoded like a file: binary data is left out)."""
    if stdin is not None:
        return stdin.read()
    buffer = getattr(sys.stdin, "buffer", None)
    return buffer.read() if buffer is not None else sys.stdin.read()


def _read_stream(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read context path {path}: {exc.strerror}") from exc
