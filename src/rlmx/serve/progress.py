"""Trace events -> progress snapshots for remote callers (streamed chunks, MCP progress notifications).

Every model call is counted; a snapshot is produced only for the events worth showing: a root turn, root
code run, a child RLM starting or ending, a limit, a rejected typed answer, the end of the run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rlmx.outcomes import SUB_CALL_PURPOSES
from rlmx.trace.events import (
    ChildEnd,
    ChildStart,
    Event,
    Exec,
    Limit,
    LMCall,
    OutputRejected,
    RunEnd,
    RunStart,
)


@dataclass
class ProgressTracker:
    run_id: str = ""
    turn: int = 0
    calls: int = 0
    sub_calls: int = 0
    children_started: int = 0
    children_done: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    started: float = field(default_factory=time.monotonic)

    def update(self, event: Event) -> dict[str, Any] | None:
        """Take one trace event; return a snapshot when it is an event worth reporting. A snapshot about
        a child, a limit or a rejected answer is named after its record's type (`child_start`, ...)."""
        if isinstance(event, RunStart):
            self.run_id = event.run_id
            return self.snapshot("started", "run started")
        if isinstance(event, LMCall):
            return self.on_call(event)
        if isinstance(event, Exec) and event.depth == 0:
            failed = " (it failed)" if event.error else ""
            return self.snapshot("code", f"turn {self.turn}: ran code{failed}")
        if isinstance(event, ChildStart):
            self.children_started += 1
            return self.snapshot(
                event.type, f"child RLM {self.children_started} started at depth {event.depth}"
            )
        if isinstance(event, ChildEnd):
            self.children_done += 1
            return self.snapshot(event.type, f"child RLM ended ({event.stopped_by})")
        if isinstance(event, Limit) and event.depth == 0:
            return self.snapshot(event.type, f"limit reached: {event.reason}")
        if isinstance(event, OutputRejected):
            return self.snapshot(event.type, "the answer did not match the schema; asked to correct it")
        if isinstance(event, RunEnd):
            return self.snapshot("done", f"run ended ({event.stopped_by})")
        return None

    def on_call(self, call: LMCall) -> dict[str, Any] | None:
        """Every call is counted; only a turn of the root RLM is reported."""
        self.calls += 1
        self.input_tokens += call.input_tokens
        self.output_tokens += call.output_tokens
        if call.purpose in SUB_CALL_PURPOSES:
            self.sub_calls += 1
            return None
        if call.depth == 0 and call.purpose == "root":
            self.turn = call.iteration or self.turn + 1
            return self.snapshot("turn", f"turn {self.turn}: the root model replied")
        return None

    def snapshot(self, event: str, message: str) -> dict[str, Any]:
        return {
            "event": event,
            "run_id": self.run_id,
            "turn": self.turn,
            "calls": self.calls,
            "sub_calls": self.sub_calls,
            "children_started": self.children_started,
            "children_done": self.children_done,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "elapsed_s": round(time.monotonic() - self.started, 2),
            "message": message,
        }

    def line(self) -> str:
        """A one-line status, e.g. for an MCP progress message."""
        tokens = self.input_tokens + self.output_tokens
        return (
            f"turn {self.turn} · {self.calls} model calls ({self.sub_calls} sub-calls) · "
            f"{self.children_started} child runs · {tokens:,} tokens"
        )


def usage_line(result: Any) -> str:
    """One line on what a finished run used: calls, tokens, cost, turns, time, why it stopped."""
    usage = result.usage or {}
    tokens = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
    cost = usage.get("cost_usd")
    cost_text = f"${cost:.4f}" if isinstance(cost, (int, float)) else "cost unknown"
    return (
        f"{usage.get('calls', 0)} model calls · {tokens:,} tokens · {cost_text} · {result.iterations} turns · "
        f"{result.elapsed_s:.1f} s · stopped by {result.stopped_by}"
    )
