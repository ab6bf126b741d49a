"""What a REPL cell writes and raises, as the model gets it back: a capped capture of its output and a
short traceback of its error. Used by the worker (`rlmx.sandbox.worker`) and the local backend."""

from __future__ import annotations

import threading
import traceback
from collections import deque


class CappedWriter:
    """A text sink keeping the first and last `limit` characters and counting the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head: list[str] = []
        self.head_len = 0
        self.tail: deque[str] = deque()
        self.tail_len = 0
        self.total = 0
        self.lock = threading.Lock()

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            s = str(s)
        with self.lock:
            self.total += len(s)
            room = self.limit - self.head_len
            if room > 0:
                self.head.append(s[:room])
                self.head_len += min(room, len(s))
                s = s[room:]
            if s:
                self.tail.append(s)
                self.tail_len += len(s)
                while self.tail and self.tail_len - len(self.tail[0]) >= self.limit:
                    self.tail_len -= len(self.tail.popleft())
        return len(s)

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return False

    def render(self) -> str:
        head = "".join(self.head)
        tail = "".join(self.tail)
        if self.total <= self.limit:
            return head + tail
        whole = head + tail if self.total == len(head) + len(tail) else None
        tail_len = self.limit // 2
        head_len = self.limit - tail_len
        tail_text = (whole if whole is not None else tail)[-tail_len:] if tail_len else ""
        omitted = self.total - head_len - len(tail_text)
        return f"{head[:head_len]}\n[{omitted} characters omitted]\n{tail_text}"


def short_traceback(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<cell>"]
    lines = [f"  line {f.lineno}, in {f.name}" for f in frames[-5:]]
    head = "Traceback (most recent call last):\n" + "\n".join(lines) + "\n" if lines else ""
    return head + "".join(traceback.format_exception_only(type(exc), exc)).strip()
