"""Traces as short text for remote callers (the MCP `trace` tool): find one, list recent ones, summarise.

Only files in the given trace folder are read (a symlink leading out of it is not followed), so a caller
cannot use this to read other files, nor the traces of other servers (each has a folder of its own).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from rlmx.errors import ConfigError
from rlmx.trace.events import RunStart, from_record

RUN_ID = re.compile(r"^[0-9a-f]{6,32}$")
CODE_LINE_CHARS = 100


def find_trace(spec: str, trace_dir: Path) -> Path:
    """A trace by run id (the trace id of a served run, also of a session's question: `...-ID.qN.jsonl`)
    or file name, inside `trace_dir` only."""
    spec = spec.strip()
    base = trace_dir.resolve()
    if RUN_ID.match(spec):
        named = [*base.glob(f"*-{spec}.jsonl"), *base.glob(f"*-{spec}.q*.jsonl")]  # .qN: a session's question
        matches = sorted(p for p in named if _in_folder(p, base))
        if matches:
            return matches[-1].resolve()
        raise ConfigError(f"no trace with run id {spec!r} in {base}")
    name = Path(spec).name
    if spec != name and Path(spec).resolve().parent != base:
        raise ConfigError(f"only traces in {base} can be read; give a run id or a file name from there")
    candidate = (base / name).resolve()
    if candidate.parent != base or not candidate.is_file() or not name.endswith(".jsonl"):
        raise ConfigError(f"no trace file {name!r} in {base}")
    return candidate


def _in_folder(path: Path, base: Path) -> bool:
    """A regular file that really lies in `base` (a symlink leading out of it does not count)."""
    real = path.resolve()
    return real.parent == base and real.is_file()


def recent_traces(trace_dir: Path, limit: int = 10) -> str:
    base = trace_dir.resolve()
    found = [p for p in base.glob("*.jsonl") if _in_folder(p, base)]
    files = sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)[:limit]
    if not files:
        return f"no traces yet in {trace_dir}"
    lines = [f"{len(files)} most recent traces in {trace_dir}:"]
    for path in files:
        start = _run_start(path)
        question = start.question_text[:80].replace("\n", " ") if start is not None else ""
        run_id = start.run_id if start is not None and start.run_id else "?"
        lines.append(f"- {run_id}  {path.name}  {question!r}")
    return "\n".join(lines)


def _run_start(path: Path) -> RunStart | None:
    """The file's first record when it is a run_start (a listing reads one line per trace, no more)."""
    with open(path, encoding="utf-8") as handle:
        try:
            record = json.loads(handle.readline() or "{}")
            event = from_record(record) if isinstance(record, dict) else None
        except (TypeError, ValueError):
            return None
    return event if isinstance(event, RunStart) else None


def describe_trace(path: Path, *, turns: bool = False) -> str:
    """A summary of the last run in the trace file: outcome, usage, the RLM tree; with `turns`, each root turn."""
    import rlmx.trace

    trace = rlmx.trace.load(path)
    summary = trace.summary()
    cost = summary.get("cost_usd")
    tokens = int(summary.get("input_tokens") or 0) + int(summary.get("output_tokens") or 0)
    lines = [
        f"run {trace.run_start.run_id or '?'} (trace: {path})",
        f"question: {summary.get('question')}",
        f"answer: {summary.get('answer')}",
        (
            f"stopped by {summary.get('stopped_by') or 'nothing yet (unfinished or cancelled)'} after "
            f"{summary.get('iterations') or 0} turns · {summary.get('calls')} model calls · {tokens:,} tokens · "
            + (f"${cost:.4f}" if isinstance(cost, (int, float)) else "cost unknown")
            + (f" · {summary['elapsed_s']} s" if summary.get("elapsed_s") is not None else "")
        ),
        "RLMs:",
    ]
    for node in trace.nodes():
        cells = [cell for turn in node.turns for cell in turn.cells]
        subs = sum(len(cell.sub_calls) for cell in cells)
        children = sum(len(cell.children) for cell in cells)
        label = "root" if node.depth == 0 else repr(node.question[:60])
        lines.append(
            f"{'  ' * node.depth}- depth {node.depth} {label}: {len(node.turns)} turns, {len(cells)} code cells, "
            f"{subs} sub-calls, {children} child RLMs; stopped by {node.stopped_by or '-'}"
        )
    if turns:
        lines.append("root turns:")
        for turn in trace.root.turns:
            for cell in turn.cells:
                code = cell.code.strip().splitlines()
                first = code[0][:CODE_LINE_CHARS] if code else ""
                error = cell.exec.error if cell.exec is not None else "(still running)"
                more = f" (+{len(code) - 1} lines)" if len(code) > 1 else ""
                lines.append(
                    f"  turn {turn.iteration}: {first}{more} · {len(cell.sub_calls)} sub-calls"
                    + (f" · error: {str(error).splitlines()[-1][:120]}" if error else "")
                )
    return "\n".join(lines)
