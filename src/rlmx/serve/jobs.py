"""Bounded concurrent runs with a queue, and one run as a cancellable job with a progress feed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from rlmx.rlm import RLM, RunResult
from rlmx.serve.progress import ProgressTracker
from rlmx.trace.events import Event
from rlmx.trace.writer import Sink


class Busy(Exception):
    """Every run slot and queue place is taken."""


class RunGate:
    """At most `max_running` runs at once and `max_queued` waiting; beyond that, admission fails fast."""

    def __init__(self, max_running: int, max_queued: int) -> None:
        if max_running < 1 or max_queued < 0:
            raise ValueError("max_running must be >= 1 and max_queued >= 0")
        self.max_running = max_running
        self.max_queued = max_queued
        self.admitted = 0
        self.running = 0
        self._slots = asyncio.Semaphore(max_running)

    def admit(self) -> Ticket:
        if self.admitted >= self.max_running + self.max_queued:
            raise Busy(
                f"the server is busy: {self.running} runs in progress and {self.admitted - self.running} "
                f"queued (limits: {self.max_running} running, {self.max_queued} queued); retry later"
            )
        self.admitted += 1
        return Ticket(self)


class Ticket:
    """A place in the gate: a queue place at first, a run slot once `run_slot()` is entered."""

    def __init__(self, gate: RunGate) -> None:
        self.gate = gate
        self.closed = False

    @contextlib.asynccontextmanager
    async def run_slot(self) -> Any:
        await self.gate._slots.acquire()
        self.gate.running += 1
        try:
            yield
        finally:
            self.gate.running -= 1
            self.gate._slots.release()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.gate.admitted -= 1


class RunJob:
    """One RLM run in its own task: waits for a run slot, runs, and feeds progress snapshots to a queue.

    Cancelling the job cancels the run; the engine's finally blocks kill its REPL workers (a session's
    REPL stays for its next question, restarted if the cancelled one left it mid-cell).
    """

    def __init__(
        self,
        make_rlm: Callable[[Sink], RLM] | None,
        ticket: Ticket,
        *,
        start: Callable[[Sink], Awaitable[RunResult]] | None = None,
        question: str,
        context: Any,
        context_note: str | None,
        output: Any,
        run_id: str,
    ) -> None:
        self.tracker = ProgressTracker(run_id=run_id)
        self.events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.ticket = ticket
        self.run_id = run_id
        self.session_id: str | None = None  # the session the run is a question of
        self._make_rlm = make_rlm
        self._start = start  # instead of a new RLM: e.g. the next question of a session
        self._args = (question, context, context_note, output)
        self.task: asyncio.Task[RunResult] = asyncio.create_task(self._run())

    def _sink(self, event: Event) -> None:
        snapshot = self.tracker.update(event)
        if snapshot is not None:
            self.events.put_nowait(snapshot)

    async def _run(self) -> RunResult:
        question, context, note, output = self._args
        try:
            if self.ticket.gate.running >= self.ticket.gate.max_running:
                self.events.put_nowait(self.tracker.snapshot("queued", "waiting for a free run slot"))
            async with self.ticket.run_slot():
                if self._start is not None:
                    return await self._start(self._sink)
                assert self._make_rlm is not None
                rlm = self._make_rlm(self._sink)
                return await rlm.arun(question, context, context_note=note, output=output, run_id=self.run_id)
        finally:
            self.ticket.close()
            self.events.put_nowait(None)

    async def cancel(self) -> None:
        """Cancel the run and wait until its clean-up (workers killed) is done, even if we are cancelled."""
        if not self.task.done():
            self.task.cancel()
        await asyncio.shield(asyncio.wait({self.task}))
        if self.task.done() and not self.task.cancelled():
            self.task.exception()  # retrieved, so an error of a cancelled run is not logged as lost
