"""Progress on stderr: the live tree (terminal), plain lines (pipes), nothing with --quiet."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from observability_runs import SCRIPTED, depth2_policy, run_depth2
from policies import repl, turn
from rlmx import RLM, ModelOptions
from rlmx.display.progress import MAX_CHILDREN_SHOWN, LiveTree, PlainLines, ProgressState
from rlmx.outcomes import SUB_CALL_PURPOSES
from rlmx.testing import CallInfo, ScriptedServer
from rlmx.trace import (
    BatchStart,
    ChildEnd,
    ChildStart,
    Event,
    ExecStart,
    LMCall,
    RunEnd,
    RunStart,
    Unknown,
    from_record,
    read_events,
)
from rlmx.trace.events import excerpt

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> list[Event]:
    """The depth-2 run's events, as the display gets them (read back from its trace)."""
    path = tmp_path_factory.mktemp("progress") / "run.jsonl"
    with ScriptedServer(depth2_policy) as srv:
        assert run_depth2(srv, path).stopped_by == "final"
    return read_events(path)


def run_end_of(events: list[Event]) -> RunEnd:
    end = events[-1]
    assert isinstance(end, RunEnd)
    return end


def snapshot(tree: LiveTree) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=120, color_system=None).print(tree.render())
    return buffer.getvalue()


def replay_until(events: list[Event], stop: Callable[[Event], bool]) -> LiveTree:
    tree = LiveTree(io.StringIO())
    tree.closed = True  # draw on demand only, no live refresh thread
    for event in events:
        tree(event)
        if stop(event):
            break
    return tree


def test_live_tree_shows_root_turn_running_code_children_and_batch_counters(
    events: list[Event],
) -> None:
    # the moment the first child starts its own batch: root code running, rlm batch 0/2 done
    tree = replay_until(events, lambda e: isinstance(e, BatchStart) and e.depth == 1)
    text = snapshot(tree)
    assert text.startswith("rlmx ") and "calls |" in text and "$" in text
    assert "root turn 1 · running code: notes = llm_query_batched" in text
    assert "rlm_query_batched 0/2" in text
    assert "child 'child " in text and "turn 1 · running code: parts = llm_query_batched" in text
    assert "llm_query_batched 0/2" in text  # the child's own batch, nested under it
    # counters move as calls come back
    state = tree.state
    batch = next(b for b in state.batches.values() if not b.finished and b.method == "llm_query_batched")
    assert batch.done == 0 and batch.n == 2


def test_live_tree_totals_match_the_run_and_children_fold_when_done(events: list[Event]) -> None:
    tree = replay_until(events, lambda e: False)
    text = snapshot(tree)
    run_end = run_end_of(events)
    usage = run_end.usage
    assert f"{usage['calls']} calls" in text
    assert f"{usage['input_tokens']:,} in / {usage['output_tokens']:,} out tokens" in text
    assert f"${usage['cost_usd']:.4f}" in text
    assert "2 children done" in text and "child 'child A'" not in text
    assert "root turn 2 · done: final" in text


def test_many_running_children_are_summarised() -> None:
    state_events: list[Event] = [
        RunStart(id="e1", parent_id=None, depth=0, question=excerpt("q")),
        ExecStart(
            id="e3",
            parent_id="e1",
            depth=0,
            exec_id="e2",
            iteration=1,
            code=excerpt("rlm_query_batched(...)"),
        ),
    ]
    for i in range(10):
        state_events.append(ChildStart(id=f"c{i}", parent_id="e2", depth=1, question=excerpt(f"c{i}")))
    state_events.append(
        ChildEnd(id="x", parent_id="e2", depth=1, child_id="c0", stopped_by="final", iterations=2)
    )
    tree = LiveTree(io.StringIO())
    tree.closed = True
    for event in state_events:
        tree(event)
    text = snapshot(tree)
    assert text.count("child 'c") == MAX_CHILDREN_SHOWN
    assert f"{9 - MAX_CHILDREN_SHOWN} more running, 1 children done" in text


def test_plain_lines_report_steps_but_not_every_sub_call(events: list[Event]) -> None:
    stream = io.StringIO()
    lines_sink = PlainLines(stream)
    for event in events:
        lines_sink(event)
    lines = stream.getvalue().splitlines()
    assert all(line.startswith("[rlmx ") for line in lines)
    assert any("root turn 1: model replied" in line for line in lines)
    assert any("] root: running code: notes = llm_query_batched" in line for line in lines)
    assert any("root: llm_query_batched with 3 prompts" in line for line in lines)
    assert any("child 'child A' turn 1: model replied" in line for line in lines)
    assert sum("child RLM ended by final" in line for line in lines) == 2
    sub_calls = sum(1 for e in events if isinstance(e, LMCall) and e.purpose in SUB_CALL_PURPOSES)
    assert len(lines) < len(events) - sub_calls  # one line per step, none per sub-call
    assert "$" in lines[-1] and f"{run_end_of(events).usage['calls']} calls" in lines[-1]


def test_plain_lines_name_each_turn_once(events: list[Event]) -> None:
    stream = io.StringIO()
    lines_sink = PlainLines(stream)
    for event in events:
        lines_sink(event)
    said = re.findall(r"\] +(root|child '[^']*') turn (\d+|-):", stream.getvalue())
    assert ("root", "1") in said
    assert len(said) == len(set(said)), said  # no (RLM, turn) named twice


def test_a_reply_without_code_is_said_to_have_run_nothing(tmp_path: Path) -> None:
    def policy(messages: list[dict[str, Any]], request: CallInfo) -> str:
        if turn(messages) == 0:
            return "Let me think about the context first."  # no code block, no FINAL
        return repl("FINAL('done')")

    with ScriptedServer(policy) as srv:
        rlm = RLM(SCRIPTED, model_options=ModelOptions(base_url=srv.url), trace=tmp_path / "run.jsonl")
        assert rlm.run("What is it?", "some context").stopped_by == "final"
    stream = io.StringIO()
    lines_sink = PlainLines(stream)
    for event in read_events(tmp_path / "run.jsonl"):
        lines_sink(event)
    lines = stream.getvalue().splitlines()
    first = next(line for line in lines if "root turn 1:" in line)
    second = next(line for line in lines if "root turn 2:" in line)
    assert "model replied" in first and "no code block; the reply was not run" in first
    assert "no code block" not in second


def test_progress_state_ignores_unknown_record_types() -> None:
    state = ProgressState()
    event = from_record({"type": "something_new", "id": "e1", "parent_id": None, "depth": 0})
    assert isinstance(event, Unknown)
    state.apply(event)
    assert state.calls == 0 and state.nodes == {}


# --- through the CLI ---------------------------------------------------------------------------------------
def ask_args(url: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rlmx.cli",
        "ask",
        "What do the children find?",
        "--model",
        SCRIPTED,
        "--base-url",
        url,
        "--max-depth",
        "2",
        "--no-trace",
        "--price",
        f"{SCRIPTED}=100,400",
    ]


def test_cli_without_a_tty_writes_plain_lines_and_quiet_writes_none() -> None:
    with ScriptedServer(depth2_policy) as srv:
        plain = subprocess.run(ask_args(srv.url), capture_output=True, text=True, timeout=120)
        quiet = subprocess.run([*ask_args(srv.url), "--quiet"], capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0 and quiet.returncode == 0, plain.stderr + quiet.stderr
    assert not ANSI.search(plain.stderr)
    assert "root turn 1: model replied" in plain.stderr and "root: running code:" in plain.stderr
    assert "rlm_query_batched with 2 prompts" in plain.stderr
    assert quiet.stderr == ""
    assert plain.stdout == quiet.stdout  # the answer, on stdout, either way


def test_cli_on_a_terminal_draws_the_live_tree() -> None:
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm-256color"}
    with ScriptedServer(depth2_policy) as srv:
        proc = subprocess.run(
            ask_args(srv.url), stdout=subprocess.PIPE, stderr=slave, text=True, env=env, timeout=120
        )
    os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    screen = ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))
    assert proc.returncode == 0, screen
    assert "rlmx " in screen and "calls |" in screen
    assert "root turn" in screen and ("2 children done" in screen or "child 'child" in screen)
    assert "[rlmx] stopped by final" in screen
    assert "root turn 1: running code" not in screen  # not the plain-lines format
