"""`rlmx ask` from a shell, against the scripted server: output, --json fields, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from examples.support_tickets.generate import QUESTION, generate

from policies import is_forced_final, is_root, repl, tickets_policy, turn
from rlmx.testing import Fault, ScriptedServer

RLMX = [sys.executable, "-m", "rlmx.cli"]


def rlmx(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [*RLMX, *args], input=stdin, capture_output=True, text=True, env=full_env, timeout=120
    )


@pytest.fixture()
def tickets_file(tmp_path: Path) -> tuple[Path, int]:
    text, gold, _ = generate(seed=3)
    path = tmp_path / "tickets.txt"
    path.write_text(text)
    return path, gold


def test_ask_json_answers_the_tickets_question(tickets_file: tuple[Path, int], tmp_path: Path) -> None:
    path, gold = tickets_file
    trace = tmp_path / "run.jsonl"
    with ScriptedServer(tickets_policy) as srv:
        proc = rlmx(
            "ask",
            QUESTION,
            "--context",
            str(path),
            "--model",
            "openai:scripted",
            "--base-url",
            srv.url,
            "--json",
            "--trace",
            str(trace),
        )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) >= {"answer", "stopped_by", "iterations", "usage", "trace_path", "elapsed_s"}
    assert out["answer"] == gold and out["stopped_by"] == "final" and out["iterations"] == 4
    assert set(out["usage"]) >= {"calls", "input_tokens", "output_tokens", "cost_usd", "by_model"}
    assert out["usage"]["by_model"]["openai:scripted"]["calls"] == out["usage"]["calls"]
    assert out["usage"]["cost_usd"] is None  # no price known for a scripted model
    assert out["trace_path"] == str(trace) and trace.exists()
    assert "turn 1" in proc.stderr  # progress on stderr


def test_ask_plain_prints_the_answer_and_reads_stdin() -> None:
    with ScriptedServer(lambda m, r: "FINAL(hello from stdin)" if is_root(r) else "x") as srv:
        proc = rlmx(
            "ask",
            "q",
            "--context",
            "-",
            "--model",
            "openai:scripted",
            "--base-url",
            srv.url,
            "--quiet",
            "--no-trace",
            stdin="some text",
        )
        assert "some text" not in srv.requests[0].messages[1]["content"]  # never the context itself
        assert "9 characters" in srv.requests[0].messages[1]["content"]
    assert proc.returncode == 0 and proc.stdout.strip() == "hello from stdin" and proc.stderr == ""


def test_exit_code_3_when_a_limit_stopped_the_run(tmp_path: Path) -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        return "FINAL(partial)" if is_forced_final(request) else repl(f"print({turn(messages)})")

    with ScriptedServer(policy) as srv:
        proc = rlmx(
            "ask",
            "q",
            "--model",
            "openai:scripted",
            "--base-url",
            srv.url,
            "--max-iterations",
            "2",
            "--json",
            "--no-trace",
        )
    assert proc.returncode == 3
    out = json.loads(proc.stdout)
    assert out["stopped_by"] == "max_iterations" and out["answer"] == "partial" and out["trace_path"] is None


def test_exit_code_1_on_a_run_error() -> None:
    with ScriptedServer(lambda m, r: "x", faults=lambda r: Fault.status(403, message="forbidden")) as srv:
        proc = rlmx("ask", "q", "--model", "openai:scripted", "--base-url", srv.url, "--no-trace")
    assert proc.returncode == 1
    assert "403" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["ask", "q", "--base-url", "http://127.0.0.1:9/v1"], {}, "needs a model name too"),
        (["ask", "q", "--model", "nope:x"], {}, "unknown provider 'nope'"),
        (["ask", "q", "--model", "openai:gpt-5-mini"], {}, "no API key for openai:gpt-5-mini"),
        (
            ["ask", "q", "--model", "openai:x", "--base-url", "http://127.0.0.1:9/v1", "-c", "/no/such/file"],
            {},
            "context path not found",
        ),
        (["ask", "q", "--model", "openai:x", "--max-llm-calls", "0"], {}, "max_llm_calls must be >= 1"),
        (["ask", "q", "--max-depth", "two"], {}, "Invalid value for '--max-depth'"),
        (["ask"], {}, "Missing argument"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(args: list[str], env: dict[str, str], expected: str) -> None:
    proc = rlmx(*args, env=env)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_debug_shows_the_traceback() -> None:
    proc = rlmx("ask", "q", "--model", "nope:x", "--debug")
    assert proc.returncode != 0 and "Traceback" in proc.stderr
