"""A batch's results: one JSON line an item, appended and fsync'd as each item finishes.

Reading tolerates what a killed driver leaves (a last line cut short: dropped, and cut off the file
before anything is appended). The latest line of an id is its result; `rewrite` keeps one line an id,
atomically (a temporary file renamed over the old one).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rlmx.errors import ConfigError
from rlmx.outcomes import BATCH_LIMIT_REASONS

FIELDS = (
    "id",
    "answer",
    "answer_source",
    "stopped_by",
    "usage",
    "error",
    "elapsed_s",
    "trace_path",
    "attempts",
    "node",
    "sandbox",
)


def is_failed(record: dict[str, Any]) -> bool:
    """The item ended in error (a failed run, or a limit's stop without an answer)."""
    return record.get("error") is not None


def is_unstarted(record: dict[str, Any]) -> bool:
    """A batch limit was reached before the item (or its retry) started: a later run with more budget
    runs it."""
    return (
        record.get("stopped_by") in BATCH_LIMIT_REASONS
        and record.get("error") is None
        and record.get("answer_source") == "none"
    )


class ResultsFile:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.lines = 0  # lines read by `load`
        self.dropped_partial = False
        self._handle: Any = None

    def load(self) -> dict[str, dict[str, Any]]:
        """The latest result of each id already written (keys: the id as a string)."""
        latest: dict[str, dict[str, Any]] = {}
        self.lines = 0
        if not self.path.exists():
            return latest
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read results {self.path}: {exc.strerror or exc}") from None
        complete, _, tail = data.rpartition(b"\n")
        self.dropped_partial = bool(tail.strip())
        for number, raw in enumerate(complete.split(b"\n") if complete else [], 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except json.JSONDecodeError:
                raise ConfigError(
                    f"results {self.path}, line {number}, is not JSON; was it written by rlmx batch? "
                    "Fix or move the file, or choose another `out`"
                ) from None
            if not isinstance(record, dict) or "id" not in record:
                raise ConfigError(f"results {self.path}, line {number}, has no id; choose another `out`")
            latest[str(record["id"])] = record
            self.lines += 1
        return latest

    def open(self) -> None:
        """Open for appending; a last line cut short by a killed driver is cut off first."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            data = self.path.read_bytes()
            keep = data.rfind(b"\n") + 1
            if keep != len(data):
                with open(self.path, "r+b") as handle:
                    handle.truncate(keep)
        self._handle = open(self.path, "a", encoding="utf-8")

    def append(self, record: dict[str, Any]) -> None:
        if self._handle is None:
            self.open()
        self._handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def rewrite(self, records: Iterable[dict[str, Any]]) -> None:
        """Replace the file with `records`, one line each, atomically."""
        self.close()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                for record in records:
                    handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
