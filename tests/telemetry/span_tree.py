"""Spans as plain records (from the SDK's in-memory exporter or a receiver's API), and the check that
they mirror a run's rlmx trace: every record where the trace tree puts it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rlmx.trace.events import ChildStart, Event, Exec, LMCall, RunStart, ToolCall


@dataclass
class Span:
    name: str
    span_id: str
    parent_id: str | None
    trace_id: str
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    status: str = "UNSET"
    kind: str = ""

    def text(self) -> str:
        """Everything a backend would show of the span, as one string (for what must not be in it)."""
        return json.dumps([self.name, self.attributes, self.events], default=str)


def from_sdk(spans: Any) -> list[Span]:
    return [
        Span(
            name=s.name,
            span_id=f"{s.context.span_id:016x}",
            parent_id=f"{s.parent.span_id:016x}" if s.parent else None,
            trace_id=f"{s.context.trace_id:032x}",
            attributes=dict(s.attributes or {}),
            events=[{"name": e.name, "attributes": dict(e.attributes or {})} for e in s.events],
            status=s.status.status_code.name,
            kind=s.kind.name,
        )
        for s in spans
    ]


def by_record(spans: list[Span]) -> dict[str, Span]:
    return {str(s.attributes["rlmx.record_id"]): s for s in spans if "rlmx.record_id" in s.attributes}


def check_mirrors(spans: list[Span], events: list[Event], parent_id: str | None = None) -> Span:
    """Assert the spans are the run's trace tree; returns the run span. `parent_id`: the span the run
    span must hang under (None: it is a root)."""
    ids = {s.span_id: s for s in spans}
    runs = [s for s in spans if s.name == "invoke_agent rlmx"]
    assert len(runs) == 1, [s.name for s in spans]
    run = runs[0]
    assert run.parent_id == parent_id
    start = next(e for e in events if isinstance(e, RunStart))
    records = by_record(spans)
    nodes = {start.id: run}
    for e in events:
        if isinstance(e, ChildStart):
            nodes[e.id] = records[e.id]
            assert nodes[e.id].name == "invoke_agent rlmx.child"
            assert ids[str(nodes[e.id].parent_id)] is records[str(e.parent_id)], (
                "a child hangs under its cell"
            )

    def turn_parent(span: Span, owner: str, iteration: int | None) -> None:
        turn = ids[str(span.parent_id)]
        assert turn.name == "rlmx turn" and turn.attributes["rlmx.iteration"] == iteration, span.name
        assert ids[str(turn.parent_id)] is nodes[owner]

    counted = {"chat": 0, "cell": 0, "tool": 0}
    for e in events:
        if isinstance(e, LMCall):
            span = records[e.id]
            counted["chat"] += 1
            assert span.name.startswith("chat ")
            if str(e.parent_id) in nodes and e.iteration is not None:  # an RLM's own turn
                turn_parent(span, str(e.parent_id), e.iteration)
            else:  # a sub-call: under the cell that made it
                assert ids[str(span.parent_id)] is records[str(e.parent_id)]
        elif isinstance(e, Exec):
            counted["cell"] += 1
            assert records[e.id].name == "rlmx cell"
            turn_parent(records[e.id], str(e.parent_id), e.iteration)
        elif isinstance(e, ToolCall):
            counted["tool"] += 1
            assert records[e.id].name == f"execute_tool {e.name}"
            assert ids[str(records[e.id].parent_id)] is records[str(e.parent_id)]
    names = [s.name for s in spans]
    assert sum(n.startswith("chat ") for n in names) == counted["chat"]
    assert names.count("rlmx cell") == counted["cell"]
    assert sum(n.startswith("execute_tool ") for n in names) == counted["tool"]
    assert all(s.trace_id == run.trace_id for s in spans)
    return run


def expected_count(events: list[Event]) -> int:
    """How many spans the run's records make: the run, each RLM's turns, model calls, cells, children,
    tool calls."""
    turns = {(str(e.parent_id), e.iteration) for e in events if isinstance(e, (LMCall, Exec)) and e.iteration}
    turns = {t for t in turns if any(isinstance(e, (RunStart, ChildStart)) and e.id == t[0] for e in events)}
    made = sum(isinstance(e, (LMCall, Exec, ChildStart, ToolCall)) for e in events)
    return 1 + len(turns) + made


def token_totals(spans: list[Span]) -> dict[str, int]:
    return {
        key: sum(int(s.attributes.get(f"gen_ai.usage.{key}", 0)) for s in spans)
        for key in ("input_tokens", "output_tokens")
    }
