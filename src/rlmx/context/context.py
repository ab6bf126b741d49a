"""`Context`: one type for everything a run can be asked about, in memory or on disk.

    Context.of("some text")                          # str, list, dict: a value in memory
    Context.from_paths(["logs/", "notes.md"], include=["*.log", "*.md"])
    Context.from_paths(["tickets.jsonl"])            # one JSONL/CSV file: a list of records

A value in memory is encoded once for the worker. Files are only listed here (names, sizes and a sniff
of their first KiB to leave out binary and empty ones); the REPL worker reads them itself, once, so a
40 MB folder is never copied through the host. `check_usable()` refuses a context that holds nothing to
work on before any model call; `skipped_summary()` is the line that tells the user what was left out.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import PurePath
from typing import IO, Any

from rlmx.context import usable
from rlmx.context.metadata import path_stats, render, size_summary, stats_of, tally
from rlmx.context.payload import ContextPayload
from rlmx.context.prefilter import Prefilter
from rlmx.context.sources import LoadOptions, Manifest, scan
from rlmx.errors import EmptyContext
from rlmx.images.probe import IMAGE_SUFFIXES

PathLike = str | os.PathLike[str]


class Context:
    """A context value, or the files to read it from. Build with `Context.of` or `Context.from_paths`."""

    def __init__(
        self,
        value: Any = None,
        *,
        manifest: Manifest | None = None,
        given: Sequence[str] | None = None,
    ) -> None:
        if isinstance(value, Context):
            raise TypeError("Context(Context(...)): use Context.of(), which passes a Context through")
        self._value = value
        self.manifest = manifest
        self.given = None if given is None else tuple(given)  # the paths it came from, for messages

    @classmethod
    def of(cls, value: Any) -> Context:
        """A Context for a value: a Context as is; a path (pathlib) or list of paths as files; else in memory."""
        if isinstance(value, Context):
            return value
        if isinstance(value, PurePath):
            return cls.from_paths([value])
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, PurePath) for v in value):
            return cls.from_paths(list(value))
        if isinstance(value, (bytes, bytearray)):
            from rlmx.context.decode import decode_bytes

            text = decode_bytes(bytes(value)).text  # bytes of text are that text; others stay (unusable)
            if text and not text.isspace():
                return cls(text)
        return cls(value)

    @classmethod
    def from_paths(
        cls,
        paths: PathLike | Sequence[PathLike],
        *,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        gitignore: bool = True,
        hidden: bool = False,
        stdin: IO[str] | None = None,
    ) -> Context:
        """Files, folders (recursive) and "-" (standard input). One file gives its value: text, or
        records for JSONL/CSV, or the parsed JSON; anything else gives a list of {"path", "text"} documents."""
        specs = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        given = [os.fspath(spec) for spec in specs]
        if not specs:
            return cls(None, given=given)
        options = LoadOptions(tuple(include), tuple(exclude), gitignore, hidden)
        manifest = scan(specs, options, stdin)
        if not manifest.files and len(manifest.inline) == 1 and len(specs) == 1:
            return cls(manifest.inline[0]["text"], given=given)  # stdin or a pipe alone: its text
        return cls(manifest=manifest, given=given)

    @property
    def is_files(self) -> bool:
        return self.manifest is not None

    def load(self) -> Any:
        """The context value, built in this process (the worker does the same from the payload)."""
        if self.manifest is None:
            return self._value
        from rlmx.context.payload import load_manifest

        return load_manifest(self.manifest)[0]

    def stats(self) -> dict[str, Any]:
        """Shape and size; for files, from the scan alone (bytes on disk), the worker later says exactly."""
        if self.manifest is None:
            return stats_of(self._value)
        m = self.manifest
        stats: dict[str, Any]
        if m.single and not m.files:  # the one input given was left out: "" (empty) or None
            from rlmx.context.payload import empty_value

            stats = stats_of(m.inline[0]["text"] if m.inline else empty_value(m.skipped))
        elif m.single and m.files[0].fmt != "image":
            entry = m.files[0]
            stats = {"kind": "str", "chars": entry.size, "estimated": True}
            if entry.fmt in ("jsonl", "csv", "json"):
                stats = {"kind": "other", "type_name": f"value read from {entry.name} ({entry.fmt})"}
        else:
            names = [d["path"] for d in m.inline] + [f.name for f in m.files]
            sizes = [len(d["text"]) for d in m.inline] + [0 if f.fmt == "image" else f.size for f in m.files]
            stats = {
                "kind": "documents",
                "count": len(names),
                "chars": sum(sizes),
                "sizes": size_summary(sizes),
                "estimated": True,
                **path_stats(names),
            }
            images = Counter(
                IMAGE_SUFFIXES[PurePath(f.name).suffix.lower()] for f in m.files if f.fmt == "image"
            )
            if images:
                stats["images"] = dict(images.most_common())
            if not names:
                stats = {"kind": "list", "count": 0, "chars": 0, "sizes": [], "item_kinds": {}}
        if m.skipped:
            stats["skipped"] = tally(m.skipped)
        return stats

    def describe(self, note: str | None = None) -> str:
        """The metadata lines for the root prompt (for files: from the scan, until the worker has loaded)."""
        return render(self.stats(), note=note)

    def check_usable(self) -> None:
        """Raise `EmptyContext` (one line: what was given, what was skipped and why, how to proceed) when
        this context holds no usable text: every file skipped or none found, an empty or binary file or
        standard input, an empty or whitespace-only str, an empty list or dict, bytes that are not text.
        Cheap: it looks at the scan (names, sizes, first KiB) or the value, never reads whole files.
        `Context(None)` (no context at all) passes; `Context.from_paths([])` does not."""
        if self.manifest is not None:
            problem = usable.files_problem(self.given or (), self.manifest)
        elif self.given == ():  # Context.from_paths([])
            problem = usable.files_problem((), Manifest())
        else:
            origin = usable.given_text(self.given) if self.given else None
            problem = usable.value_problem(self._value, origin)
        if problem is not None:
            raise EmptyContext(problem)

    def check_loaded(self, stats: dict[str, Any]) -> None:
        """Raise `EmptyContext` when the worker's measure of the loaded context (`LoadedContext.stats`, the
        READY frame's figures) shows it holds nothing: files the scan could not judge from their first
        KiB (a PDF without a text layer, an undecodable file) were all left out when read."""
        given = usable.given_text(self.given) if self.given else "the context"
        problem = usable.loaded_problem(stats, given)
        if problem is not None:
            raise EmptyContext(problem)

    def skipped_summary(self) -> str | None:
        """One line for stderr, "skipped 3 of 5 files: 2 binary (a.png, b.bin), 1 empty (notes.txt)";
        None when nothing was skipped or the context is a value in memory."""
        return None if self.manifest is None else usable.skipped_summary(self.manifest)

    def payload(
        self,
        *,
        query: str | None = None,
        prefilter: Prefilter | str | None = None,
        note: str | None = None,
        cache_dir: str | None = None,
    ) -> ContextPayload:
        """What the worker gets: the value encoded once, or the list of files to read; plus options."""
        options: dict[str, Any] = {}
        pf = Prefilter.parse(prefilter)
        if pf is not None:
            if not query:
                raise ValueError("a pre-filter needs the question (query=...)")
            options["prefilter"] = pf.options(query)
        if note:
            options["note"] = note
        if cache_dir:
            options["cache_dir"] = cache_dir
        if self.manifest is not None:
            blob = json.dumps(self.manifest.to_json(), ensure_ascii=False).encode("utf-8")
            return ContextPayload("files", blob, options)
        base = ContextPayload.of(self._value)
        return dataclasses.replace(base, options=options)

    def __repr__(self) -> str:
        if self.manifest is None:
            return f"Context({type(self._value).__name__})"
        m = self.manifest
        return f"Context({len(m.files)} files, {len(m.inline)} inline, {len(m.skipped)} skipped)"
