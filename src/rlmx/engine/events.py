"""One event stream per run; the trace writer, the progress display and the CLI all consume it."""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

SCHEMA_VERSION = 1
EXCERPT_CHARS = 2_000

Record = dict[str, Any]
Sink = Callable[[Record], None]


class Emitter:
    """Makes trace records (`type`, `schema_version`, `id`, `parent_id`, `depth`, `t`) and fans them out."""

    def __init__(self, sinks: list[Sink] | None = None) -> None:
        self.sinks: list[Sink] = list(sinks or [])
        self._ids = itertools.count(1)

    def new_id(self) -> str:
        return f"e{next(self._ids)}"

    def emit(
        self, type_: str, *, parent_id: str | None, depth: int, id_: str | None = None, **fields: Any
    ) -> str:
        record: Record = {
            "type": type_,
            "schema_version": SCHEMA_VERSION,
            "id": id_ or self.new_id(),
            "parent_id": parent_id,
            "depth": depth,
            "t": round(time.time(), 4),
            **fields,
        }
        for sink in self.sinks:
            sink(record)
        return str(record["id"])


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> dict[str, Any]:
    """Size plus a capped head/tail excerpt: the trace never grows with the context."""
    if limit <= 0 or len(text) <= 2 * limit:
        return {"chars": len(text), "text": text}
    return {"chars": len(text), "head": text[:limit], "tail": text[-limit:]}


def default_trace_dir() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "rlmx" / "traces"


class TraceWriter:
    """Appends every record to a JSONL file and flushes it as it happens."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = open(path, "a", encoding="utf-8")

    def __call__(self, record: Record) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
