"""`rlmx traces` (the list), `rlmx traces prune` and `rlmx view --last`, run from a shell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from policies import is_root
from rlmx.testing import ScriptedServer
from rlmx.trace.writer import TraceWriter

RLMX = [sys.executable, "-m", "rlmx.cli"]
DAY = 86400.0


def rlmx(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RLMX, *args], capture_output=True, text=True, env=dict(os.environ), timeout=120)


def traces_dir() -> Path:
    return Path(os.environ["XDG_STATE_HOME"]) / "rlmx" / "traces"


def write_trace(
    name: str,
    *,
    age_days: float,
    question: str = "q",
    finished: bool = True,
    cost: float | None = None,
    session: str | None = None,
) -> Path:
    """A trace file as rlmx writes one (run_start ... run_end), last written `age_days` ago."""
    folder = traces_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    t = time.time() - age_days * DAY
    records = [
        {"type": "run_start", "id": "e1", "t": t, "question": {"chars": len(question), "text": question}}
        | ({"session_id": session} if session else {}),
        {"type": "lm_call", "id": "e2", "t": t + 1},
    ]
    if finished:
        records.append(
            {"type": "run_end", "id": "e3", "t": t + 2, "stopped_by": "final", "usage": {"cost_usd": cost}}
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    os.utime(path, (t + 2, t + 2))
    return path


def test_traces_lists_runs_newest_first_with_cost_and_a_footer() -> None:
    write_trace("old.jsonl", age_days=3, question="how many tickets are open?", cost=0.0123)
    write_trace("new.jsonl", age_days=1, question="which region\nsold most?")
    write_trace("mid.jsonl", age_days=2, question="x" * 80, finished=False)
    proc = rlmx("traces")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[-1] for line in lines[:3]] == [
        str(traces_dir() / n) for n in ("new.jsonl", "mid.jsonl", "old.jsonl")
    ]
    assert "which region sold most?" in lines[0] and "final" in lines[0] and "cost unknown" in lines[0]
    assert "no run_end" in lines[1] and "x" * 49 + "…" in lines[1] and "x" * 50 not in lines[1]
    assert "how many tickets are open?" in lines[2] and "$0.0123" in lines[2]
    assert lines[3].startswith("3 traces, ") and str(traces_dir()) in lines[3]
    assert "none are pruned automatically" in lines[3]

    proc = rlmx("traces", "--json", "--limit", "2")
    rows = json.loads(proc.stdout)
    assert [Path(r["path"]).name for r in rows] == ["new.jsonl", "mid.jsonl"]
    assert rows[0]["stopped_by"] == "final" and rows[0]["cost_usd"] is None
    assert rows[1]["stopped_by"] is None and rows[1]["in_progress"] is False  # old, no writer: cut off


def _layout() -> dict[str, Path]:
    return {
        "a": write_trace("a.jsonl", age_days=40),
        "s1": write_trace("s1.jsonl", age_days=50, session="S"),
        "s2": write_trace("s2.jsonl", age_days=10, session="S"),
        "b": write_trace("b.jsonl", age_days=5),
        "c": write_trace("c.jsonl", age_days=45, finished=False),  # cut off long ago: prunable
        "r": write_trace("r.jsonl", age_days=0, finished=False),  # no run_end, just written: running
        "w": write_trace("w.jsonl", age_days=90, finished=False),  # old, but a writer holds it
    }


def _left(files: dict[str, Path]) -> set[str]:
    return {key for key, path in files.items() if path.exists()}


def test_prune_older_than_keeps_sessions_together_and_running_traces() -> None:
    files = _layout()
    writer = TraceWriter(files["w"])
    os.utime(files["w"], (time.time() - 90 * DAY,) * 2)
    try:
        proc = rlmx("traces", "prune", "--older-than", "30d", "--dry-run")
        assert proc.returncode == 0, proc.stderr
        assert _left(files) == set(files)  # a dry run removes nothing
        assert f"would remove {files['a']}" in proc.stdout and f"would remove {files['c']}" in proc.stdout
        proc = rlmx("traces", "prune", "--older-than", "30d")
        assert proc.returncode == 0, proc.stderr
        # s1 is 50 days old, but its session's newest question (s2) is 10: the session stays whole
        assert _left(files) == {"s1", "s2", "b", "r", "w"}
        assert "2 of 7 traces" in proc.stdout
    finally:
        writer.close()


def test_prune_keep_counts_a_session_as_one_and_never_takes_a_running_trace() -> None:
    files = _layout()
    writer = TraceWriter(files["w"])
    os.utime(files["w"], (time.time() - 90 * DAY,) * 2)
    try:
        proc = rlmx("traces", "prune", "--keep", "2")
        assert proc.returncode == 0, proc.stderr
        assert _left(files) == {"r", "b", "w"}  # the newest two units, and the one still written
    finally:
        writer.close()
    proc = rlmx("traces", "prune", "--keep", "0", "--older-than", "1d")
    assert proc.returncode == 0, proc.stderr
    assert _left(files) == {"r"}  # w's writer closed: old and cut off, it may go now; r is running


def test_prune_needs_a_rule_and_a_readable_age() -> None:
    proc = rlmx("traces", "prune")
    assert proc.returncode == 2 and "--older-than" in proc.stderr
    proc = rlmx("traces", "prune", "--older-than", "soon")
    assert proc.returncode == 2 and "not an age" in proc.stderr


def test_view_last_renders_the_newest_trace(tmp_path: Path) -> None:
    proc = rlmx("view", "--last")
    assert proc.returncode == 2 and "no traces in" in proc.stderr and len(proc.stderr.splitlines()) == 1
    for question in ("first-question-zz", "second-question-zz"):
        with ScriptedServer(lambda m, r: "FINAL(ok)" if is_root(r) else "x") as srv:
            ask = rlmx("ask", question, "--model", "openai:scripted", "--base-url", srv.url, "--quiet")
        assert ask.returncode == 0, ask.stderr
        time.sleep(0.05)
    out = tmp_path / "last.html"
    proc = rlmx("view", "--last", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert "second-question-zz" in html and "first-question-zz" not in html
    assert proc.stdout.strip() == str(out)
    proc = rlmx("view", "x.jsonl", "--last")
    assert proc.returncode == 2 and "not both" in proc.stderr
