"""What the host's inbox of one REPL worker holds (a frame the worker sent, or news about the worker or
a request the host is answering), and the clock of the cell that is running."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from rlmx.sandbox import frames


@dataclass(frozen=True)
class WorkerGone:
    """The worker's pipe closed: it died (or was killed)."""


@dataclass(frozen=True)
class Broken:
    """The exchange cannot go on: the worker broke the protocol, or the host's handler has a bug."""

    error: Exception


@dataclass(frozen=True)
class RpcDone:
    """The host has answered request `id` (`refused`: with a failure)."""

    id: int
    refused: bool


Inbound = frames.Frame | WorkerGone | Broken | RpcDone


@dataclass
class CellClock:
    """A running cell's time and requests. Time spent in sub-calls is not the cell's own -- until a
    request is refused: from then on all time counts, so a loop of refused requests cannot hold the
    cell open for ever."""

    exec_id: int
    budget: float
    started: float = field(default_factory=time.monotonic)
    used: float = 0.0
    charged: bool = False
    rpc_calls: int = 0
    active: dict[int, asyncio.Task[None]] = field(default_factory=dict)

    @property
    def paused(self) -> bool:
        return bool(self.active) and not self.charged

    def timeout(self) -> float | None:
        return None if self.paused else max(0.0, self.budget - self.used)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def cancel(self) -> None:
        for task in self.active.values():
            task.cancel()
        self.active.clear()
