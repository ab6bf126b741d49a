"""The trace folder as a list of runs: each file read cheaply (its first record and its last one, never
the middle), what is still being written, and which files may go when old traces are pruned.

A file still being written is never pruned: its writer holds a shared `flock` on it (`TraceWriter`), and
a file whose last record is not `run_end` and that changed in the last `ACTIVE_MINUTES` counts as being
written too (a writer on a system without flock, or one that just opened it). A session's questions
(runs whose `run_start` names the same `session_id`) are pruned together or not at all. Nothing is pruned
automatically: only `rlmx traces prune` removes traces.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlmx.trace.events import RunEnd, RunStart, excerpt_text

ACTIVE_MINUTES = 60  # a file with no run_end that changed this recently is taken to be still written
_TAIL_CHUNK = 64 * 1024
_TAIL_MAX = 4 * 1024 * 1024  # the last record is looked for in at most this many bytes from the end


@dataclass(frozen=True)
class TraceInfo:
    """One trace file as `rlmx traces` lists it."""

    path: Path
    size: int
    mtime: float
    started: float | None  # run_start's time (None: no readable run_start)
    question: str
    session_id: str | None
    stopped_by: str | None  # run_end's (None: no run_end, the run is running or was cut off)
    cost_usd: float | None
    in_progress: bool

    @property
    def when(self) -> float:
        return self.started if self.started is not None else self.mtime

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "started": self.started,
            "modified": self.mtime,
            "bytes": self.size,
            "question": self.question,
            "session_id": self.session_id,
            "stopped_by": self.stopped_by,
            "cost_usd": self.cost_usd,
            "in_progress": self.in_progress,
        }


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def first_record(path: Path) -> dict[str, Any] | None:
    with open(path, "rb") as f:
        return _record(f.readline())


def last_record(path: Path) -> dict[str, Any] | None:
    """The file's last complete line as a record, read backwards from the end in chunks."""
    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        tail = b""
        pos = end
        while pos > 0 and end - pos < _TAIL_MAX:
            step = min(_TAIL_CHUNK, pos)
            pos -= step
            f.seek(pos)
            tail = f.read(step) + tail
            lines = tail.rstrip(b"\n").split(b"\n")
            if len(lines) > 1 or pos == 0:
                return _record(lines[-1]) if lines[-1] else None
    return None


def held_by_writer(path: Path) -> bool:
    """Whether a `TraceWriter` holds the file open (its shared flock blocks an exclusive one)."""
    try:
        import fcntl
    except ImportError:  # no flock here: only the no-run_end-and-recent rule applies
        return False
    try:
        with open(path, "rb") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(f, fcntl.LOCK_UN)
    except OSError:
        return False
    return False


def read_info(path: Path, now: float | None = None) -> TraceInfo:
    now = time.time() if now is None else now
    stat = path.stat()
    try:
        first, last = first_record(path), last_record(path)
    except OSError:
        first = last = None
    start = first if first and first.get("type") == RunStart.TYPE else {}
    end = last if last and last.get("type") == RunEnd.TYPE else None
    usage = (end or {}).get("usage") or {}
    recent = now - stat.st_mtime < ACTIVE_MINUTES * 60
    t = start.get("t")
    return TraceInfo(
        path=path,
        size=stat.st_size,
        mtime=stat.st_mtime,
        started=float(t) if isinstance(t, (int, float)) else None,
        question=excerpt_text(start.get("question")) if start else "",
        session_id=start.get("session_id") if isinstance(start.get("session_id"), str) else None,
        stopped_by=str(end.get("stopped_by")) if end else None,
        cost_usd=usage.get("cost_usd") if isinstance(usage.get("cost_usd"), (int, float)) else None,
        in_progress=held_by_writer(path) or (end is None and recent),
    )


def scan(folder: Path) -> list[TraceInfo]:
    """Every `*.jsonl` trace directly in `folder`, newest first (none when the folder does not exist)."""
    if not folder.is_dir():
        return []
    now = time.time()
    infos = []
    for path in folder.glob("*.jsonl"):
        try:
            infos.append(read_info(path, now))
        except OSError:  # removed while we looked
            continue
    return sorted(infos, key=lambda info: (info.when, info.mtime), reverse=True)


def groups(infos: list[TraceInfo]) -> list[list[TraceInfo]]:
    """The traces as prune units, newest first: a session's questions together, any other run alone."""
    by_key: dict[str, list[TraceInfo]] = {}
    for info in infos:
        key = f"session:{info.session_id}" if info.session_id else f"file:{info.path}"
        by_key.setdefault(key, []).append(info)
    return sorted(by_key.values(), key=lambda group: max(i.when for i in group), reverse=True)


def to_prune(
    infos: list[TraceInfo], *, older_than_s: float | None, keep: int | None, now: float | None = None
) -> list[TraceInfo]:
    """The files to remove: units beyond the newest `keep` and/or whose newest file changed more than
    `older_than_s` ago (both given: a unit must meet both), never a unit with a file being written."""
    now = time.time() if now is None else now
    chosen: list[TraceInfo] = []
    for rank, group in enumerate(groups(infos)):
        if any(info.in_progress for info in group):
            continue
        if keep is not None and rank < keep:
            continue
        if older_than_s is not None and now - max(info.mtime for info in group) <= older_than_s:
            continue
        chosen.extend(group)
    return chosen


def parse_age(text: str) -> float:
    """`30d`, `12h`, `90m`, `45s`, `2w` as seconds; ValueError for anything else."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    text = text.strip().lower()
    if len(text) < 2 or text[-1] not in units or not text[:-1].replace(".", "", 1).isdigit():
        raise ValueError(f"{text!r} is not an age like 30d, 12h, 90m or 2w")
    return float(text[:-1]) * units[text[-1]]


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
