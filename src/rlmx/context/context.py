"""`Context`: one type for everything a run can be asked about, in memory or on disk.

    Context.of("some text")                          # str, list, dict: a value in memory
    Context.from_paths(["logs/", "notes.md"], include=["*.log", "*.md"])
    Context.from_paths(["tickets.jsonl"])            # one JSONL/CSV file: a list of records

A value in memory is encoded once for the worker. Files are only listed here (names and sizes, no
contents); the REPL worker reads them itself, once, so a 40 MB folder is never copied through the host.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from pathlib import PurePath
from typing import IO, Any

from rlmx.context.metadata import path_stats, render, size_summary, stats_of, tally
from rlmx.context.prefilter import Prefilter
from rlmx.context.sources import LoadOptions, Manifest, scan
from rlmx.sandbox.base import ContextPayload

PathLike = str | os.PathLike[str]


class Context:
    """A context value, or the files to read it from. Build with `Context.of` or `Context.from_paths`."""

    def __init__(self, value: Any = None, *, manifest: Manifest | None = None) -> None:
        if isinstance(value, Context):
            raise TypeError("Context(Context(...)): use Context.of(), which passes a Context through")
        self._value = value
        self.manifest = manifest

    @classmethod
    def of(cls, value: Any) -> Context:
        """A Context for a value: a Context as is; a path (pathlib) or list of paths as files; else in memory."""
        if isinstance(value, Context):
            return value
        if isinstance(value, PurePath):
            return cls.from_paths([value])
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, PurePath) for v in value):
            return cls.from_paths(list(value))
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
        if not specs:
            return cls(None)
        options = LoadOptions(tuple(include), tuple(exclude), gitignore, hidden)
        manifest = scan(specs, options, stdin)
        if not manifest.files and len(manifest.inline) == 1 and len(specs) == 1:
            return cls(manifest.inline[0]["text"])  # stdin or a pipe alone: its text
        return cls(manifest=manifest)

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
        if m.single:
            entry = m.files[0]
            stats: dict[str, Any] = {"kind": "str", "chars": entry.size, "estimated": True}
            if entry.fmt in ("jsonl", "csv", "json"):
                stats = {"kind": "other", "type_name": f"value read from {entry.name} ({entry.fmt})"}
        else:
            names = [d["path"] for d in m.inline] + [f.name for f in m.files]
            sizes = [len(d["text"]) for d in m.inline] + [f.size for f in m.files]
            stats = {
                "kind": "documents",
                "count": len(names),
                "chars": sum(sizes),
                "sizes": size_summary(sizes),
                "estimated": True,
                **path_stats(names),
            }
            if not names:
                stats = {"kind": "list", "count": 0, "chars": 0, "sizes": [], "item_kinds": {}}
        if m.skipped:
            stats["skipped"] = tally(m.skipped)
        return stats

    def describe(self, note: str | None = None) -> str:
        """The metadata lines for the root prompt (for files: from the scan, until the worker has loaded)."""
        return render(self.stats(), note=note)

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


def load_options(include: Sequence[str] = (), exclude: Sequence[str] = ()) -> LoadOptions:
    return LoadOptions(tuple(include), tuple(exclude))
