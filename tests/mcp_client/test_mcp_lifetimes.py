"""How long MCP servers live: one per run; one per session (its questions share it); one per process
for a batch's runs (started by the first item, stopped when the batch ends); never shared between two
runs of `rlmx serve`'s callers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mcp_support import repl, small

import rlmx.batch
from process_support import wait_until
from rlmx import RLM, Limits, ModelOptions, SandboxSettings
from rlmx.testing import ScriptedModel, ScriptedServer

SERVERS = {"mcpServers": {"small": small()}}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def pid_rlm(**settings: Any) -> RLM:
    model = ScriptedModel(root=[repl("FINAL(str(small_pid()))")])
    return RLM(
        model.lm(), trace=False, sandbox=SandboxSettings(backend="process"), mcp_servers=SERVERS, **settings
    )


def test_each_run_starts_its_own_server_and_stops_it_when_it_ends() -> None:
    rlm = pid_rlm()
    first, second = int(rlm.run("q").answer), int(rlm.run("q").answer)
    assert first != second
    assert wait_until(lambda: not alive(first) and not alive(second), seconds=10)


def test_a_sessions_questions_share_one_server_stopped_with_the_session() -> None:
    rlm = pid_rlm()
    with rlm.session() as session:
        pids = {int(session.ask("q1").answer), int(session.ask("q2").answer)}
        assert len(pids) == 1 and alive(next(iter(pids)))
    assert wait_until(lambda: not alive(next(iter(pids))), seconds=10)


def test_a_batchs_items_share_one_server_per_process_started_lazily(tmp_path: Path) -> None:
    policy = ScriptedModel(root=[repl("FINAL(str(small_pid()))")])
    items = [{"id": str(i), "question": f"q{i}"} for i in range(4)]
    with ScriptedServer(policy) as srv:
        rlm = RLM(
            "openai:scripted",
            model_options=ModelOptions(base_url=srv.url, api_key="sk-test-fake"),
            limits=Limits(max_iterations=3),
            sandbox=SandboxSettings(backend="process"),
            mcp_servers=SERVERS,
            trace=False,
        )
        batch = rlmx.batch.run(items, rlm, out=tmp_path / "results.jsonl", concurrency=2)
        rows = list(batch)
    pids = {row["answer"] for row in rows}
    assert len(rows) == 4 and len(pids) == 1, rows
    assert wait_until(lambda: not alive(int(next(iter(pids)))), seconds=10)
