"""Where events go: the `Emitter` stamps each with an id and a time and hands it to the run's sinks (the
JSONL trace, the progress display, a user's `on_event`); `TraceWriter` is the JSONL sink."""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import IO, TypeVar

from rlmx.trace.events import Event

Sink = Callable[[Event], None]
E = TypeVar("E", bound=Event)
log = logging.getLogger("rlmx")


class Emitter:
    """Stamps events (`id` when empty, `t`) and fans them out. A sink that raises is reported once, on
    the `rlmx` logger, and gets no more events: a display or a user's callback never ends a run nor
    hides the run's own error."""

    def __init__(self, sinks: list[Sink] | None = None) -> None:
        self.sinks: list[Sink] = list(sinks or [])
        self.sink_errors: list[str] = []
        self._ids = itertools.count(1)

    def new_id(self) -> str:
        return f"e{next(self._ids)}"

    def emit(self, event: E) -> E:
        """Send `event` to every sink; returns it stamped (its `id` names it in later records)."""
        event = replace(event, id=event.id or self.new_id(), t=round(time.time(), 4))
        for sink in list(self.sinks):
            try:
                sink(event)
            except Exception as exc:  # a sink's own failure: reported once, then that sink is dropped
                self.sinks.remove(sink)
                message = f"on_event sink {sink!r} raised {type(exc).__name__}: {exc}; it gets no more events"
                self.sink_errors.append(message)
                log.warning("rlmx: %s", message)
        return event


class TraceWriter:
    """Appends every event to a JSONL file as one record, flushed as it happens. While open it holds a
    shared flock on the file, so `rlmx traces prune` can tell it is still being written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = open(path, "a", encoding="utf-8")
        _share_lock(self._file)

    def __repr__(self) -> str:
        return f"TraceWriter({str(self.path)!r})"

    def __call__(self, event: Event) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps(event.to_record(), ensure_ascii=False, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _share_lock(file: IO[str]) -> None:
    """A shared flock for as long as the file is open (none where flock is missing or refused)."""
    try:
        import fcntl

        fcntl.flock(file.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
    except (ImportError, OSError):
        pass
