"""The context on its way to the REPL: `ContextPayload` (what the host sends) and `load_payload` (what the
process that holds the context builds from it).

The host encodes a context once (`Context.payload`, or `ContextPayload.of` for a plain value); the
sandbox carries the payload to the worker as it is. `load_payload` is the one way back to a value: the
worker calls it once at start-up (a zygote may call it before it drops privileges and forks workers,
which then share the loaded memory). Files are read there, never in the host, and never re-sent: a
payload of kind "files" carries only their names.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlmx.context.metadata import stats_of, tally

if TYPE_CHECKING:
    from rlmx.context.sources import Manifest

PIECE_BYTES = 1 << 20  # a large context is sent in slices of this size


@dataclass(frozen=True)
class ContextPayload:
    """The context, encoded once for the worker (never re-encoded per turn or per restart)."""

    kind: (
        str  # "inline-text" | "inline-json" | "files" (a JSON manifest; the worker reads the files) | "none"
    )
    blob: bytes = b""
    # For the worker, sent in INIT as `context_options`: "prefilter" ({query, method, k}), "cache_dir"
    # (where search indexes may be cached), "note" (a line the model's metadata ends with).
    options: dict[str, Any] = field(default_factory=dict)

    # An "inline-text" payload keeps the caller's str instead of a UTF-8 copy of it (40 MB less in the
    # host for a 40 MB context); it is encoded a slice at a time while it is sent (`size`, `pieces`).
    text: str | None = None

    @classmethod
    def of(cls, context: Any) -> ContextPayload:
        if context is None:
            return cls("none")
        if isinstance(context, str):
            return cls("inline-text", text=context)
        return cls("inline-json", json.dumps(context, ensure_ascii=False, default=str).encode("utf-8"))

    def size(self) -> int:
        """Bytes on the wire."""
        if self.text is None:
            return len(self.blob)
        if self.text.isascii():
            return len(self.text)
        return sum(len(piece) for piece in self.pieces())

    def pieces(self, chunk: int = PIECE_BYTES) -> Iterator[bytes | memoryview]:
        """The payload's bytes in slices of about `chunk`, never copied whole."""
        if self.text is None:
            view = memoryview(self.blob)
            for start in range(0, len(self.blob), chunk):
                yield view[start : start + chunk]
            return
        for start in range(0, len(self.text), chunk):  # UTF-8 of a concatenation = the concatenated UTF-8
            yield self.text[start : start + chunk].encode("utf-8")

    def data(self) -> bytes:
        """The whole payload as bytes (for an in-process sandbox, which decodes it at once)."""
        return self.blob if self.text is None else self.text.encode("utf-8")


@dataclass
class LoadedContext:
    value: Any  # what the REPL's `context` is
    stats: dict[str, Any]  # its shape and size, plus what was left out (see rlmx.context.metadata)


def load_manifest(manifest: Manifest) -> tuple[Any, list[tuple[str, str]], list[tuple[str, str]]]:
    """The value, the files left out and notes on files read: (value, [(name, reason)], [(name, note)])."""
    from rlmx.context.formats import image_document, read_file  # here: a zygote of a str needs neither
    from rlmx.images.probe import UNREADABLE

    skipped = list(manifest.skipped)
    notes: list[tuple[str, str]] = []
    if manifest.single and not manifest.files:  # the one input was left out by the host's scan
        if manifest.inline:
            return manifest.inline[0]["text"], skipped, notes
        return empty_value(skipped), skipped, notes
    if manifest.single and manifest.files[0].fmt != "image":  # one image: a list of one image document
        entry = manifest.files[0]
        read = read_file(entry.path, entry.fmt, as_records=True)
        if read.note:
            notes.append((entry.name, read.note))
        if read.skip is not None:
            skipped.append((entry.name, read.skip))
            return empty_value(skipped), skipped, notes
        return (read.value if read.value is not None else read.text), skipped, notes
    docs: list[dict[str, Any]] = [{"path": d["path"], "text": d["text"]} for d in manifest.inline]
    for entry in manifest.files:
        if entry.fmt == "image":
            doc = image_document(entry.path, entry.name, entry.size)
            if doc is None:
                skipped.append((entry.name, UNREADABLE))
            else:
                docs.append(doc)
            continue
        read = read_file(entry.path, entry.fmt)
        if read.skip is not None:
            skipped.append((entry.name, read.skip))
            continue
        if read.note:
            notes.append((entry.name, read.note))
        docs.append({"path": entry.name, "text": read.text})
    return docs, skipped, notes


def empty_value(skipped: list[tuple[str, str]]) -> Any:
    """The value of a context whose one input was left out: "" for an empty one, else None."""
    return "" if skipped and skipped[-1][1] == "empty" else None


def load_payload(payload: ContextPayload) -> LoadedContext:
    """Decode or read the context a payload describes, apply its pre-filter, and measure it."""
    skipped: list[tuple[str, str]] = []
    notes: list[tuple[str, str]] = []
    if payload.kind == "none":
        value: Any = None
    elif payload.kind == "inline-text":
        value = payload.data().decode("utf-8")
    elif payload.kind == "inline-json":
        value = json.loads(payload.data())
    elif payload.kind == "files":
        from rlmx.context.sources import Manifest

        value, skipped, notes = load_manifest(Manifest.from_json(json.loads(payload.data())))
    else:
        raise ValueError(f"unknown context payload kind {payload.kind!r}")
    filtered = None
    prefilter = payload.options.get("prefilter")
    if prefilter and value is not None:
        value, filtered = prefilter_in_child(
            value,
            query=str(prefilter["query"]),
            method=str(prefilter.get("method", "bm25")),
            k=int(prefilter["k"]),
            cache_dir=payload.options.get("cache_dir"),
        )
    stats = stats_of(value)
    if skipped:
        stats["skipped"] = tally(skipped)
    if notes:
        stats["notes"] = tally(notes)
    if filtered:
        stats["filtered"] = filtered
    return LoadedContext(value, stats)


def prefilter_in_child(value: Any, **options: Any) -> tuple[Any, dict[str, Any] | None]:
    """Run the pre-filter in a forked child and take back only the kept chunks.

    The index (hundreds of MB for 10M tokens; torch for vector search) never lives in this process, which
    every REPL of the run is forked from, and this process stays single-threaded (numpy and torch start
    threads; a multi-threaded process cannot enter a new user namespace). Raises ValueError on failure.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: filter, write the result as JSON, exit without cleanup handlers
        code = 0
        try:
            os.close(read_fd)
            from rlmx.context.prefilter import apply_prefilter

            kept, info = apply_prefilter(value, **options)
            reply: dict[str, Any] = {"ok": True, "whole": kept is value, "info": info}
            if kept is not value:
                reply["value"] = kept
        except BaseException as exc:  # reported to the parent, which raises it as a start-up error
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            code = 1
        try:
            with os.fdopen(write_fd, "wb") as out:
                out.write(json.dumps(reply, ensure_ascii=False).encode("utf-8"))
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    method = options.get("method", "bm25")
    if not data:
        raise ValueError(f"the {method} pre-filter's process died before it answered")
    reply = json.loads(data)
    if not reply["ok"]:
        raise ValueError(f"the {method} pre-filter failed: {reply['error']}")
    return (value if reply["whole"] else reply["value"]), reply["info"]
