"""A batch's progress on stderr: a rich bar on a terminal (done / failed / running, spend, ETA), plain
lines when piped (one a finished item), and the summary at the end."""

from __future__ import annotations

import time
from typing import IO, Any

from rlmx.batch.runner import Summary
from rlmx.usage import cost_text


def eta(summary: Summary, todo: int) -> str:
    done = summary.ran
    if done == 0 or summary.wall_s <= 0:
        return "?"
    left = max(0, todo - done) * summary.wall_s / done
    return f"{left:.0f} s" if left < 120 else f"{left / 60:.0f} min"


def spend(summary: Summary) -> str:
    return cost_text((summary.fleet or {}).get("cost_usd", 0.0))


class PlainProgress:
    """One line a finished item: `[rlmx] 12/40 t-012 final; 1 failed, 4 running, $0.0123, ETA 30 s`."""

    def __init__(self, stream: IO[str], todo: int) -> None:
        self.stream = stream
        self.todo = todo

    def item(self, record: dict[str, Any], summary: Summary) -> None:
        error = record.get("error")
        why = f" ({error.splitlines()[0][:100]})" if error else ""
        self.stream.write(
            f"[rlmx] {summary.ran}/{self.todo} {record['id']} {record['stopped_by']}{why}; "
            f"{summary.failed} failed, {summary.running} running, {spend(summary)}, ETA {eta(summary, self.todo)}\n"
        )
        self.stream.flush()

    def tick(self, summary: Summary) -> None:
        pass

    def close(self) -> None:
        pass


class BarProgress:
    """A rich progress bar, redrawn as items finish and every half second."""

    def __init__(self, stream: IO[str], todo: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.todo = todo
        self.progress = Progress(
            TextColumn("[bold]batch"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=Console(file=stream),
            transient=False,
        )
        self.task = self.progress.add_task("batch", total=todo, status="")
        self.progress.start()
        self.last = 0.0

    def _status(self, summary: Summary) -> str:
        return f"{summary.failed} failed, {summary.running} running, {spend(summary)}, ETA {eta(summary, self.todo)}"

    def item(self, record: dict[str, Any], summary: Summary) -> None:
        self.progress.update(self.task, completed=summary.ran, status=self._status(summary))

    def tick(self, summary: Summary) -> None:
        now = time.monotonic()
        if now - self.last >= 0.5:
            self.last = now
            self.progress.update(self.task, completed=summary.ran, status=self._status(summary))

    def close(self) -> None:
        self.progress.stop()


def progress_for(stream: IO[str], todo: int, *, quiet: bool) -> PlainProgress | BarProgress | None:
    if quiet or todo == 0:
        return None
    return BarProgress(stream, todo) if stream.isatty() else PlainProgress(stream, todo)
