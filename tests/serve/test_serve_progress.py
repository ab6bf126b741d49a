"""Progress snapshots for remote callers (served streams, MCP notifications), folded from typed events."""

from __future__ import annotations

from rlmx.serve.progress import ProgressTracker
from rlmx.trace import (
    ChildEnd,
    ChildStart,
    Exec,
    Limit,
    LMCall,
    OutputRejected,
    RunEnd,
    RunStart,
    Unknown,
)


def test_the_tracker_counts_every_call_and_reports_only_the_steps_worth_showing() -> None:
    tracker = ProgressTracker(run_id="from-the-server")
    events = [
        RunStart(id="e1", run_id="abc123"),
        LMCall(id="e2", parent_id="e1", purpose="root", iteration=1, input_tokens=100, output_tokens=20),
        Exec(id="e3", parent_id="e1", iteration=1, error="KeyError: 'id'"),
        LMCall(id="e4", parent_id="e3", depth=1, purpose="llm_query", input_tokens=10, output_tokens=2),
        LMCall(id="e5", parent_id="e3", depth=1, purpose="fallback", input_tokens=10, output_tokens=2),
        ChildStart(id="e6", parent_id="e3", depth=1),
        LMCall(id="e7", parent_id="e6", depth=1, purpose="child_root", iteration=1, input_tokens=30),
        ChildEnd(id="e8", parent_id="e3", depth=1, child_id="e6", stopped_by="max_iterations"),
        Limit(id="e9", parent_id="e6", depth=1, reason="max_iterations"),  # a child's limit: not reported
        Limit(id="e10", parent_id="e1", reason="max_llm_calls", iteration=1),
        OutputRejected(id="e11", parent_id="e1", iteration=2, errors=["count: not an integer"]),
        Unknown(id="e12", parent_id="e1", record_type="something_new"),
        RunEnd(id="e13", parent_id="e1", stopped_by="max_llm_calls"),
    ]
    snapshots = [tracker.update(event) for event in events]
    kinds = [None if s is None else s["event"] for s in snapshots]
    assert kinds == [
        "started",
        "turn",
        "code",
        None,
        None,
        "child_start",
        None,
        "child_end",
        None,
        "limit",
        "output_rejected",
        None,
        "done",
    ]
    messages = {s["event"]: s["message"] for s in snapshots if s is not None}
    assert messages["turn"] == "turn 1: the root model replied"
    assert messages["code"] == "turn 1: ran code (it failed)"
    assert messages["child_start"] == "child RLM 1 started at depth 1"
    assert messages["child_end"] == "child RLM ended (max_iterations)"
    assert messages["limit"] == "limit reached: max_llm_calls"
    assert messages["done"] == "run ended (max_llm_calls)"
    last = snapshots[-1]
    assert last is not None and last["run_id"] == "abc123" and last["turn"] == 1
    assert last["calls"] == 4 and last["sub_calls"] == 2  # llm_query and fallback are sub-calls
    assert last["children_started"] == last["children_done"] == 1
    assert last["input_tokens"] == 150 and last["output_tokens"] == 24
    assert tracker.line() == "turn 1 · 4 model calls (2 sub-calls) · 1 child runs · 174 tokens"
