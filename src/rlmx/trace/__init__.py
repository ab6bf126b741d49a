"""Read an rlmx JSONL trace back: typed events, the call tree, and usage recomputed from the records.

    import rlmx.trace
    trace = rlmx.trace.load("run.jsonl")          # the last run in the file
    print(trace.summary())                         # answer, stopped_by, iterations, calls, tokens, cost
    for node in trace.nodes():                     # the root RLM and every child RLM
        for turn in node.turns:
            for cell in turn.cells:                # code the model ran, with what it started
                print(node.depth, turn.iteration, cell.code[:60], len(cell.sub_calls), len(cell.children))
    assert trace.usage()["calls"] == trace.run_end.get("usage")["calls"]

Record types and their fields are documented in docs/observability.md. Each record has `type`,
`schema_version`, `id`, `parent_id`, `depth` and `t`; model calls and children hang under the code cell
(`exec` id) that made them; a child RLM's own records hang under its `child_start` id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlmx.errors import ConfigError
from rlmx.trace.events import (
    ChildEnd,
    ChildStart,
    Event,
    Exec,
    Final,
    LMCall,
    RunEnd,
    RunStart,
    event_from_record,
    excerpt_text,
)
from rlmx.trace.tree import Batch, Cell, RLMNode, Trace, Turn, build

__all__ = [
    "Batch",
    "Cell",
    "ChildEnd",
    "ChildStart",
    "Event",
    "Exec",
    "Final",
    "LMCall",
    "RLMNode",
    "RunEnd",
    "RunStart",
    "Trace",
    "Turn",
    "build",
    "event_from_record",
    "excerpt_text",
    "load",
    "load_all",
    "read_records",
    "split_runs",
]


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a JSONL trace file. A torn last line (a killed writer) is dropped."""
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


def split_runs(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A file can hold several runs (appended); each starts with a depth-0 `run_start`."""
    runs: list[list[dict[str, Any]]] = []
    for record in records:
        if record["type"] == "run_start" and record.get("parent_id") is None:
            runs.append([])
        if runs:
            runs[-1].append(record)
    return runs


def load_all(path: str | Path) -> list[Trace]:
    records = read_records(path)
    runs = split_runs(records)
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
