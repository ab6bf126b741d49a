"""Persistent sessions: several questions in one REPL (rlmx.session), through the scripted server and
the real process sandbox; and `rlmx chat` driven through its standard input."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from policies import last_user, question, repl, turn
from rlmx import RLM, Limits, ModelOptions
from rlmx.session import SessionClosed
from rlmx.testing import ScriptedServer
from sandbox_support import descendants, wait_no_descendants

Script = dict[str, list[str]]


class Policy:
    """Each question's turns, by the question's text; every root turn's messages are kept."""

    def __init__(self, script: Script, *, official: bool = False) -> None:
        self.script = script
        self.official = official
        self.seen: dict[str, list[list[dict[str, Any]]]] = {}

    def __call__(self, messages: list[dict[str, Any]], request: Any) -> str:
        if request.purpose == "final":
            return "FINAL(forced)"
        if request.purpose != "root":
            return "sub reply"
        asked = self.asked(messages)
        self.seen.setdefault(asked, []).append(messages)
        turns = self.script[asked]
        return turns[min(turn(messages), len(turns) - 1)]

    def asked(self, messages: list[dict[str, Any]]) -> str:
        if not self.official:
            return question(messages).splitlines()[0]
        return messages[1]["content"].removeprefix("Answer the following: ").splitlines()[0]

    def opening(self, asked: str) -> str:
        return str(self.seen[asked][0][1]["content"])

    def feedback(self, asked: str, index: int = 1) -> str:
        """The outputs the model got before its turn `index + 1` (the official profile's `Turn i/N:`
        message aside)."""
        messages = self.seen[asked][index]
        if self.official:
            messages = [m for m in messages if not str(m["content"]).startswith("Turn ")]
        return last_user(messages)


def rlm_for(srv: ScriptedServer, **kw: Any) -> RLM:
    kw.setdefault("trace", False)
    return RLM("openai:scripted", model_options=ModelOptions(base_url=srv.url), **kw)


def test_variables_contexts_and_histories_carry_over() -> None:
    policy = Policy(
        {
            "set x": [repl("x = 41\nprint('context_0:', len(context_0))"), "FINAL_VAR(x)"],
            "read x": [
                repl(
                    "print(x + 1, context_1['k'], context is context_0, history_0[0]['role'], "
                    "history is history_0, [m['role'] for m in history])\n"
                    "context_1 = 'changed'\nprint(context_1 == 'changed')"
                ),
                repl("print(context_1)"),
                "FINAL(done)",
            ],
        }
    )
    with ScriptedServer(policy) as srv, rlm_for(srv).session(context="alpha beta") as s:
        first = s.ask("set x")
        second = s.ask("read x", context={"k": [1, 2]})
        usage = s.usage
    assert (first.answer, second.answer) == (41, "done")
    assert "context_0: 10" in policy.feedback("set x")
    out = policy.feedback("read x")
    assert "42 [1, 2] True system False ['system', 'user', 'assistant']" in out
    assert "'context_1' is reserved and was restored" in out
    assert "{'k': [1, 2]}" in policy.feedback("read x", 2)
    # what the model is told: how many contexts and message lists the REPL holds
    one, two = policy.opening("set x"), policy.opening("read x")
    assert "question 1 of a session" in one and "Contexts in the REPL: 1" in one
    assert "message lists in the REPL: 0" in one
    assert "question 2 of a session" in two and "Contexts in the REPL: 2" in two
    assert "`context_1`: a dict with 1 keys" in two and "`history_0`" in two
    assert "`history` holds this question's messages" in two
    assert usage["calls"] == first.usage["calls"] + second.usage["calls"] == 5


def test_under_the_official_profile_history_is_history_0() -> None:
    policy = Policy(
        {
            "one": [repl('answer["content"] = "a"\nanswer["ready"] = True')],
            "two": [
                repl("print(history is history_0, len(history_1) if 'history_1' in dir() else None)"),
                repl('answer["content"] = "b"\nanswer["ready"] = True'),
            ],
            "three": [
                repl("print(history is history_0, len(history_1) > 2)"),
                repl('answer["content"] = "c"\nanswer["ready"] = True'),
            ],
        },
        official=True,
    )
    with ScriptedServer(policy) as srv, rlm_for(srv, prompt="official").session() as s:
        answers = [s.ask(q).answer for q in ("one", "two", "three")]
    assert answers == ["a", "b", "c"]
    assert "True None" in policy.feedback("two")
    assert "True True" in policy.feedback("three")
    assert "`history` is `history_0`" in policy.opening("two")
    assert "Contexts in the REPL: 0" in policy.opening("one")


def test_a_killed_repl_is_restarted_and_the_model_told() -> None:
    policy = Policy(
        {
            "set": [repl("x = 1\nprint('set')"), "FINAL(ok)"],
            "after kill": [
                repl("print('x' in globals(), len(context_0), context_1, len(history_0))"),
                "FINAL(ok)",
            ],
            "crash": [
                repl("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"),
                repl("print(context_1)"),
                "FINAL(ok)",
            ],
        }
    )
    with ScriptedServer(policy) as srv, rlm_for(srv).session(context="abc") as s:
        s.ask("set", context="second")
        sandbox = s._inner.state.repl.sandbox
        sandbox.handle.kill()  # the worker dies between questions (an OOM kill, an operator)
        time.sleep(0.2)
        after = s.ask("after kill")
        crashed = s.ask("crash")
    assert after.answer == "ok" and crashed.answer == "ok"
    assert "The REPL was restarted since the last question" in policy.opening("after kill")
    assert "False 3 second" in policy.feedback("after kill")
    assert "restarted" not in policy.opening("set")
    # a cell that kills its worker: told in the cell, and the session's values are back
    assert "variables were lost" in policy.feedback("crash")
    assert "second" in policy.feedback("crash", 2)
    assert "restarted since the last question" not in policy.opening("crash")


def test_a_session_wide_limit_stops_a_later_question() -> None:
    policy = Policy({q: [repl("y = 1"), "FINAL(fine)"] for q in ("a", "b", "c")})
    with ScriptedServer(policy) as srv, rlm_for(srv).session(limits=Limits(max_llm_calls=3)) as s:
        first = s.ask("a")  # two calls
        second = s.ask("b")  # one left: kept for the forced final answer
        third = s.ask("c")  # none left
        total = s.usage["calls"]
    assert first.stopped_by == "final" and first.answer == "fine"
    assert (second.stopped_by, second.answer) == ("max_llm_calls", "forced")
    assert third.stopped_by == "max_llm_calls" and third.answer is None
    assert "no session model call left" in (third.error or "")
    assert total == 3


def test_each_question_has_its_own_trace_with_the_session_id(tmp_path: Path) -> None:
    policy = Policy({q: ["FINAL(one)"] for q in ("p", "q")})
    with ScriptedServer(policy) as srv, rlm_for(srv, trace=tmp_path / "run.jsonl").session("ctx") as s:
        results = [s.ask("p"), s.ask("q")]
        session_id = s.id
    paths = [Path(r.trace_path or "") for r in results]
    assert [p.name for p in paths] == ["run.q1.jsonl", "run.q2.jsonl"]
    for path in paths:
        start = json.loads(path.read_text().splitlines()[0])
        assert start["type"] == "run_start" and start["session_id"] == session_id
    assert len(session_id) == 32


def test_default_traces_are_one_file_a_question() -> None:
    policy = Policy({q: ["FINAL(one)"] for q in ("p", "q")})
    with ScriptedServer(policy) as srv, rlm_for(srv, trace=True).session() as s:
        paths = {s.ask("p").trace_path, s.ask("q").trace_path}
    assert len(paths) == 2 and all(p and Path(p).exists() for p in paths)


def test_the_sessions_processes_are_gone_after_close() -> None:
    policy = Policy({"q": [repl("print(1)"), "FINAL(x)"]})
    with ScriptedServer(policy) as srv:
        s = rlm_for(srv).session(context="text")
        s.ask("q")
        assert len(descendants(os.getpid())) >= 2  # the zygote and the REPL's worker
        s.close()
        assert wait_no_descendants(os.getpid()) == set()
        with pytest.raises(SessionClosed):
            s.ask("q")


def test_an_idle_session_expires_and_frees_its_repl() -> None:
    policy = Policy({"q": [repl("print(1)"), "FINAL(x)"]})
    with ScriptedServer(policy) as srv, rlm_for(srv).session(idle_timeout_s=0.3) as s:
        s.ask("q")
        assert descendants(os.getpid())
        time.sleep(0.6)
        assert wait_no_descendants(os.getpid()) == set()
        with pytest.raises(SessionClosed, match="idle"):
            s.ask("q")


def test_async_session_keeps_its_repl() -> None:
    policy = Policy({"a": [repl("n = 5"), "FINAL(set)"], "b": ["FINAL_VAR(n)"]})

    async def main(rlm: RLM) -> list[Any]:
        async with rlm.asession() as s:
            answers = [(await s.aask("a")).answer, (await s.aask("b")).answer]
        await rlm.aclose()
        return answers

    with ScriptedServer(policy) as srv:
        assert asyncio.run(main(rlm_for(srv))) == ["set", 5]


def test_files_added_later_are_read_by_the_host(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the magic number is 7\n")
    policy = Policy({"q": [repl("print(context_1.strip())"), "FINAL(ok)"]})
    with ScriptedServer(policy) as srv, rlm_for(srv).session(context="first") as s:
        assert s.add_context(tmp_path / "notes.txt") == 1
        s.ask("q")
    assert "the magic number is 7" in policy.feedback("q")


def test_chat_reads_questions_from_stdin(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "b.txt").write_text("bravo bravo\n")
    policy = Policy(
        {
            "remember": [repl("kept = 'K'"), "FINAL(remembered)"],
            "recall": [repl("print(kept, context_1.strip())"), "FINAL_VAR(kept)"],
        }
    )
    lines = "remember\n\n/context {}\n/usage\nrecall\n/nonsense\n/exit\nnever asked\n"
    with ScriptedServer(policy) as srv:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "rlmx.cli",
                "chat",
                "--context",
                str(tmp_path / "a.txt"),
                "--model",
                "openai:scripted",
                "--base-url",
                srv.url,
                "--no-trace",
                "--quiet",
            ],
            input=lines.format(tmp_path / "b.txt"),
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "OPENAI_API_KEY": "test"},
        )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == "remembered"
    assert "context_1" in proc.stdout and "K" in out
    assert "K bravo bravo" in policy.feedback("recall")
    assert "never asked" not in policy.seen
    assert "usage: 2 calls" in proc.stdout  # /usage after the first question
    assert "unknown command /nonsense" in proc.stderr
    assert "session: 4 calls" in proc.stderr  # the total when it ends


def test_the_readme_example_runs_as_written() -> None:
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = text.split("## Conversations that keep their REPL", 1)[1]
    code = section.split("```python\n", 1)[1].split("```\n", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)  # it asserts its own result
    assert namespace["second"].answer == "16"


def test_a_question_stopped_mid_cell_leaves_a_fresh_repl_for_the_next() -> None:
    policy = Policy(
        {
            "slow": [repl("x = 1\nimport time\ntime.sleep(30)")],
            "next": [repl("print('x' in globals(), context_0)"), "FINAL(ok)"],
        }
    )
    limits = Limits(timeout_s=2.0, final_reserve_s=0.5)
    with ScriptedServer(policy) as srv, rlm_for(srv, limits=limits).session(context="ctx") as s:
        slow = s.ask("slow")
        after = s.ask("next")
    assert slow.stopped_by == "timeout" and slow.answer == "forced"
    assert after.answer == "ok"
    assert "The REPL was restarted since the last question" in policy.opening("next")
    assert "False ctx" in policy.feedback("next")
