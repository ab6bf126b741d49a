"""Read an rlmx JSONL trace back: typed events, the call tree, and usage recomputed from the records.

    import rlmx.trace
    from rlmx.trace import Exec, LMCall

    trace = rlmx.trace.load("run.jsonl")          # the last run in the file
    print(trace.summary())                         # answer, stopped_by, iterations, calls, tokens, cost
    for node in trace.nodes():                     # the root RLM and every child RLM
        for turn in node.turns:
            for cell in turn.cells:                # code the model ran, with what it started
                print(node.depth, turn.iteration, cell.code[:60], len(cell.sub_calls), len(cell.children))
    failed = [e for e in trace.of_type(Exec) if e.error]
    assert trace.usage()["calls"] == trace.run_end.usage["calls"]

Every record is read into its class of `rlmx.trace.events` (`from_record`), the same frozen dataclasses
the engine emits to `on_event` sinks; a record type this version does not know becomes `Unknown`.
Record types and their fields are documented in docs/observability.md. Model calls and children hang
under the code cell (`exec` id) that made them; a child RLM's own records hang under its `child_start` id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rlmx.errors import ConfigError
from rlmx.trace.events import (
    EVENT_TYPES,
    BatchEnd,
    BatchStart,
    ChildEnd,
    ChildStart,
    Compaction,
    Error,
    Event,
    Exec,
    ExecStart,
    Fallback,
    Final,
    Limit,
    LMCall,
    LMRetry,
    ModelSubstituted,
    OutputRejected,
    RunEnd,
    RunStart,
    SandboxReady,
    ToolCall,
    Unknown,
    excerpt_text,
    from_record,
    usage_of,
)
from rlmx.trace.tree import Batch, Cell, RLMNode, Trace, Turn, as_events, build

__all__ = [
    "EVENT_TYPES",
    "Batch",
    "BatchEnd",
    "BatchStart",
    "Cell",
    "ChildEnd",
    "ChildStart",
    "Compaction",
    "Error",
    "Event",
    "Exec",
    "ExecStart",
    "Fallback",
    "Final",
    "LMCall",
    "LMRetry",
    "Limit",
    "ModelSubstituted",
    "OutputRejected",
    "RLMNode",
    "RunEnd",
    "RunStart",
    "SandboxReady",
    "ToolCall",
    "Trace",
    "Turn",
    "Unknown",
    "build",
    "excerpt_text",
    "from_record",
    "load",
    "load_all",
    "read_events",
    "read_records",
    "split_runs",
    "usage_of",
]


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a JSONL trace file, as the JSON dicts on disk. A torn last line (a killed writer)
    is dropped."""
    source = Path(path)
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read trace {source}: {exc.strerror or exc}") from exc
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            if number == len(lines):
                break
            raise ConfigError(f"{source}:{number}: not a JSON trace record ({exc})") from exc
        if not isinstance(record, dict) or "type" not in record:
            raise ConfigError(f"{source}:{number}: not an rlmx trace record (no 'type')")
        records.append(record)
    return records


def read_events(path: str | Path) -> list[Event]:
    """Every record of a JSONL trace file, read into its event class."""
    return [from_record(record) for record in read_records(path)]


def split_runs(items: Iterable[Event | dict[str, Any]]) -> list[list[Event]]:
    """A file can hold several runs (appended); each starts with a depth-0 `run_start`. Takes events or
    the raw records of `read_records`."""
    runs: list[list[Event]] = []
    for event in as_events(items):
        if isinstance(event, RunStart) and event.parent_id is None:
            runs.append([])
        if runs:
            runs[-1].append(event)
    return runs


def load_all(path: str | Path) -> list[Trace]:
    runs = split_runs(read_events(path))
    if not runs:
        raise ConfigError(f"{path}: no run_start record; is this an rlmx trace?")
    return [build(run, Path(path)) for run in runs]


def load(path: str | Path, run: int = -1) -> Trace:
    """The run at index `run` (default: the last one) of the trace file at `path`."""
    traces = load_all(path)
    try:
        return traces[run]
    except IndexError:
        raise ConfigError(f"{path} holds {len(traces)} run(s); there is no run {run}") from None
