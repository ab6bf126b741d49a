"""`rlmx ask` at its edges, as a user meets them in a shell: deadlines, runs without an answer, limits,
budgets, failed cells, retries, Ctrl-C, empty contexts. Each case runs the real CLI in a subprocess of its
own session against the scripted server and checks the exit code, stdout, the first (or last) line of
stderr, and that nothing is left behind (no process of the session, no temp file)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from policies import is_forced_final, is_root, repl, turn
from process_support import session_processes, wait_until
from rlmx.testing import Fault, ScriptedServer

RLMX = [sys.executable, "-m", "rlmx.cli"]
FAST_RETRIES = "[providers.openai]\nmax_attempts = 3\nretry_base_delay_s = 0.05\nretry_max_delay_s = 0.1\n"


@dataclass
class Ran:
    code: int
    out: str
    err: str
    elapsed: float  # from the process's start: the interpreter's start-up included
    # from the run's own start (its "started" progress line on stderr) to the process's exit: what a
    # deadline bounds, free of the start-up time a loaded machine stretches; None without that line
    since_run_start: float | None = None

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


@pytest.fixture()
def shell(tmp_path: Path) -> Iterator[Any]:
    """Runs `rlmx ARGS` in a new session with its own TMPDIR; afterwards asserts that the session has no
    process left and TMPDIR is empty."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    sessions: list[int] = []

    def run(*args: str, stdin: str = "", env: dict[str, str] | None = None, timeout: float = 90) -> Ran:
        full_env = {**os.environ, "TMPDIR": str(tmp), "COLUMNS": "200", **(env or {})}
        started = time.monotonic()
        proc = subprocess.Popen(
            [*RLMX, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=full_env,
            start_new_session=True,
        )
        sessions.append(proc.pid)
        run_started: list[float] = []
        err_lines: list[str] = []

        def read_err() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                if not run_started and "] started" in line:
                    run_started.append(time.monotonic())
                err_lines.append(line)

        outs: list[str] = []
        readers = [threading.Thread(target=read_err, daemon=True)]
        readers.append(threading.Thread(target=lambda: outs.append(proc.stdout.read()), daemon=True))  # type: ignore[union-attr]
        for reader in readers:
            reader.start()
        assert proc.stdin is not None
        try:
            proc.stdin.write(stdin)
            proc.stdin.close()
        except BrokenPipeError:
            pass  # it ended (or closed stdin) first
        proc.wait(timeout=timeout)
        ended = time.monotonic()
        for reader in readers:
            reader.join(10)
        out = "".join(outs)
        since = ended - run_started[0] if run_started else None
        return Ran(proc.returncode, out, "".join(err_lines), ended - started, since)

    yield run
    for sid in sessions:
        assert wait_until(lambda sid=sid: not session_processes(sid)), (
            f"left running: {session_processes(sid)}"
        )
    assert wait_until(lambda: not list(tmp.iterdir())), f"temp files left: {list(tmp.iterdir())}"


@pytest.fixture()
def text_file(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("line one\nline two has the number 7\nline three\n" * 20)
    return path


def model_args(srv: ScriptedServer) -> list[str]:
    return ["--model", "openai:scripted", "--base-url", srv.url]


def explore_then_final(messages: list[dict[str, Any]], request: Any) -> str:
    """The root looks once, then answers; a forced final answer says 42."""
    if not is_root(request):
        return "sub"
    if is_forced_final(request):
        return "FINAL(42)"
    return repl("print(len(context))") if turn(messages) == 0 else "FINAL(done)"


# --- a deadline is a deadline ----------------------------------------------------------------------------


@pytest.mark.parametrize("fault", [Fault.stall(600), Fault.trickle(0.2)], ids=["stall", "trickle"])
def test_timeout_bounds_a_run_whose_provider_never_answers(shell: Any, text_file: Path, fault: Fault) -> None:
    with ScriptedServer(explore_then_final, faults=lambda req: fault) as srv:
        ran = shell("ask", "q", "-c", str(text_file), *model_args(srv), "--timeout", "3", "--json")
        served = srv.requests
    assert ran.since_run_start is not None and ran.since_run_start < 5, (
        ran.err
    )  # T + 2 s, from the run's start
    assert ran.elapsed < 20, ran.err  # the interpreter's start too, however loaded the machine
    assert ran.code == 1, ran.err
    out = json.loads(ran.out)
    assert out["answer"] is None and out["answer_source"] == "none" and out["stopped_by"] == "timeout"
    assert "no time left for a final answer" in out["error"]
    assert ran.err_lines[-1].startswith("rlmx: error: stopped by timeout")
    assert len(served) >= 2  # the root turn, then the forced final answer in its reserve


def test_timeout_without_json_prints_nothing_on_stdout(shell: Any, text_file: Path) -> None:
    with ScriptedServer(explore_then_final, faults=lambda req: Fault.stall(600)) as srv:
        ran = shell("ask", "q", "-c", str(text_file), *model_args(srv), "--timeout", "2")
    assert ran.code == 1 and ran.out == "" and ran.since_run_start is not None and ran.since_run_start < 4
    assert ran.err_lines[-1].startswith("rlmx: error: stopped by timeout")


def test_the_forced_final_answer_has_its_reserve_inside_the_deadline(shell: Any, text_file: Path) -> None:
    def stall_the_turns(req: Any) -> Fault | None:
        return None if is_forced_final(req) else Fault.stall(600)

    with ScriptedServer(explore_then_final, faults=stall_the_turns) as srv:
        ran = shell("ask", "q", "-c", str(text_file), *model_args(srv), "--timeout", "4", "--json")
    assert ran.code == 3, ran.err
    out = json.loads(ran.out)
    assert out["answer"] == "42" and out["answer_source"] == "final" and out["stopped_by"] == "timeout"
    assert ran.since_run_start is not None and ran.since_run_start < 6
    # the reserve is min(15 s, 25% of the timeout): the turns were stopped after about 3 s of 4
    assert 2.5 < out["elapsed_s"] < 4.5


def test_timeout_bounds_a_dns_lookup_that_hangs(shell: Any, text_file: Path, tmp_path: Path) -> None:
    """A resolver that never answers for one made-up host (patched in the child: no lookup leaves this
    machine); the lookup's thread is stuck for good, and the CLI still exits at the deadline."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(
        "import socket, threading\n"
        "_real = socket.getaddrinfo\n"
        "def _hang(host, *args, **kwargs):\n"
        "    if host == 'rlmx-dns-hang.invalid':\n"
        "        threading.Event().wait()\n"
        "    return _real(host, *args, **kwargs)\n"
        "socket.getaddrinfo = _hang\n"
    )
    env = {"PYTHONPATH": os.pathsep.join([str(hooks), os.environ.get("PYTHONPATH", "")])}
    env["RLMX_FORBID_REAL_PROVIDERS"] = "0"  # the host is never resolved: the hook holds every lookup
    url = "http://rlmx-dns-hang.invalid:9/v1"
    ran = shell(
        "ask", "q", "-c", str(text_file), "--model", "openai:x", "--base-url", url, "--timeout", "3", env=env
    )
    assert ran.since_run_start is not None and ran.since_run_start < 5, ran.err
    assert ran.code == 1 and ran.out == ""
    assert "stopped by timeout" in ran.err_lines[-1]


# --- honest outputs ------------------------------------------------------------------------------------


def code_then(forced_reply: str) -> Any:
    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if not is_root(request):
            return "sub"
        if is_forced_final(request):
            return forced_reply
        return repl("x = 7\nprint(x)")

    return policy


def test_a_limit_stopped_answer_is_the_prose_without_code(shell: Any, text_file: Path) -> None:
    policy = code_then("The count is 7.\n```python\nprint(7)\n```\nThat is all.")
    with ScriptedServer(policy) as srv:
        ran = shell("ask", "q", "-c", str(text_file), *model_args(srv), "--max-iterations", "1")
        again = shell("ask", "q", "-c", str(text_file), *model_args(srv), "--max-iterations", "1", "--json")
    assert ran.code == 3, ran.err
    assert ran.out == "The count is 7.\n\nThat is all.\n"
    assert "```" not in ran.out
    out = json.loads(again.out)
    assert out["answer_source"] == "prose" and out["stopped_by"] == "max_iterations"


def test_a_limit_stopped_answer_uses_final_var_from_the_repl(shell: Any, text_file: Path) -> None:
    with ScriptedServer(code_then("FINAL_VAR(x)")) as srv:
        ran = shell("ask", "q", "-c", str(text_file), *model_args(srv), "--max-iterations", "1", "--json")
    out = json.loads(ran.out)
    assert ran.code == 3 and out["answer"] == 7 and out["answer_source"] == "final_var"


def test_a_forced_reply_of_only_code_is_no_answer(shell: Any, text_file: Path) -> None:
    with ScriptedServer(code_then("```python\nprint(x)\n```")) as srv:
        ran = shell("ask", "q", "-c", str(text_file), *model_args(srv), "--max-llm-calls", "2")
    assert ran.code == 1 and ran.out == ""
    assert ran.err_lines[-1].startswith(
        "rlmx: error: stopped by max_llm_calls; the model's final reply held no answer"
    )


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (Fault.status(500, retry_after=0.01), "HTTP 500"),
        (Fault.status(401), "HTTP 401"),
        (Fault.invalid_json(), "malformed reply"),
    ],
    ids=["500", "401", "invalid-json"],
)
def test_a_failed_provider_prints_no_answer(
    shell: Any, text_file: Path, tmp_path: Path, fault: Fault, says: str
) -> None:
    config = tmp_path / "rlmx.toml"
    config.write_text(FAST_RETRIES)
    with ScriptedServer(explore_then_final, faults=lambda req: fault) as srv:
        url = srv.url
        ran = shell("ask", "q", "-c", str(text_file), *model_args(srv), "--config", str(config))
        as_json = shell("ask", "q", "-c", str(text_file), *model_args(srv), "--config", str(config), "--json")
    assert ran.code == 1 and ran.out == "", ran.err
    last = ran.err_lines[-1]
    assert last.startswith("rlmx: error: model call failed: openai:scripted at ") and says in last
    assert ran.err.count(url) == 1  # the URL and the model, said once
    out = json.loads(as_json.out)
    assert (
        as_json.code == 1
        and out["answer"] is None
        and out["answer_source"] == "none"
        and says in out["error"]
    )


def test_a_closed_loopback_port_fails_at_once_naming_the_url(
    shell: Any, text_file: Path, tmp_path: Path
) -> None:
    config = tmp_path / "rlmx.toml"
    config.write_text(FAST_RETRIES)
    with ScriptedServer(explore_then_final) as srv:
        url = srv.url  # a port that was just closed
    ran = shell(
        "ask",
        "q",
        "-c",
        str(text_file),
        "--model",
        "openai:scripted",
        "--base-url",
        url,
        "--config",
        str(config),
    )
    assert ran.code == 1 and ran.out == ""
    assert ran.err.count(url) == 1, ran.err
    assert "connection refused" in ran.err_lines[-1] and url in ran.err_lines[-1]
    retries = [line for line in ran.err_lines if "retrying in" in line]
    assert len(retries) <= 1, ran.err  # nothing listens on a loopback port: one quick retry, not the schedule


def test_output_schema_failure_prints_nothing_on_stdout(shell: Any, text_file: Path, tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(
        json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    )
    with ScriptedServer(lambda m, r: "FINAL(not an object)" if is_root(r) else "sub") as srv:
        ran = shell("ask", "q", "-c", str(text_file), *model_args(srv), "--output-schema", str(schema))
    assert ran.code == 1 and ran.out == ""
    assert ran.err_lines[-1].startswith("rlmx: error: ")


# --- budgets ---------------------------------------------------------------------------------------------


def test_a_budget_too_small_for_the_first_call_is_refused_at_start(shell: Any, text_file: Path) -> None:
    with ScriptedServer(explore_then_final) as srv:
        ran = shell(
            "ask",
            "q",
            "-c",
            str(text_file),
            *model_args(srv),
            "--price",
            "openai:scripted=1,2",
            "--max-cost-usd",
            "0.01",
        )
        served = srv.requests
    assert ran.code == 2 and ran.out == "" and served == []
    first = ran.err_lines[0]
    assert first.startswith("rlmx: error: --max-cost-usd 0.01 cannot pay for the first model call")
    assert "8,192 output tokens" in first and "smallest budget that can run is $0.04" in first
    assert "--max-output-tokens" in first


# --- say what happened -----------------------------------------------------------------------------------


def test_a_failed_cell_shows_its_exception_in_progress(shell: Any, text_file: Path) -> None:
    turns = [repl("def check(n):\n    raise ValueError(f'bad input {n}')\ncheck(7)"), "FINAL(ok)"]
    with ScriptedServer(lambda m, r: turns[min(turn(m), 1)] if is_root(r) else "sub") as srv:
        ran = shell("ask", "q", "-c", str(text_file), *model_args(srv))
    assert ran.code == 0 and ran.out == "ok\n"
    failed = [line for line in ran.err_lines if "code failed" in line]
    assert failed and failed[0].endswith("code failed: ValueError: bad input 7")


def test_each_retry_is_a_progress_line_with_its_reason(shell: Any, text_file: Path) -> None:
    def first_two_throttled(req: Any) -> Fault | None:
        return Fault.status(429, retry_after=0.05) if req.index < 2 else None

    with ScriptedServer(explore_then_final, faults=first_two_throttled) as srv:
        ran = shell("ask", "q", "-c", str(text_file), *model_args(srv))
    assert ran.code == 0, ran.err
    retries = [line for line in ran.err_lines if "retrying in" in line]
    assert len(retries) == 2
    assert "openai:scripted attempt 1 failed: HTTP 429" in retries[0] and "retrying in 0.1 s" in retries[0]
    assert "attempt 2 failed: HTTP 429" in retries[1]


def test_ctrl_c_says_interrupted_names_the_trace_and_ends_it(text_file: Path, tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    with ScriptedServer(explore_then_final, faults=lambda req: Fault.stall(600)) as srv:
        proc = subprocess.Popen(
            [*RLMX, "ask", "q", "-c", str(text_file), *model_args(srv), "--trace", str(trace)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert wait_until(lambda: srv.requests != [], 30), "the run never reached the model"
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert out == ""
    assert err.splitlines()[-1] == f"rlmx: interrupted; trace: {trace}"
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert records[-1]["type"] == "run_end" and records[-1]["stopped_by"] == "interrupted"
    assert wait_until(lambda: not session_processes(proc.pid))


# --- empty contexts --------------------------------------------------------------------------------------


def test_a_context_of_only_binaries_is_refused_before_any_call(shell: Any, tmp_path: Path) -> None:
    folder = tmp_path / "assets"
    folder.mkdir()
    (folder / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 20)
    (folder / "b.bin").write_bytes(b"\x00\x01\x02" * 1000)
    (folder / "empty.txt").write_text("")
    with ScriptedServer(explore_then_final) as srv:
        ran = shell("ask", "q", "-c", str(folder), *model_args(srv))
        allowed = shell("ask", "q", "-c", str(folder), *model_args(srv), "--allow-empty-context")
        served = len(srv.requests)
    assert ran.code == 2 and ran.out == ""
    assert len(ran.err_lines) == 1
    assert ran.err_lines[0].startswith(f"rlmx: error: context {folder} holds no usable text")
    assert "2 binary" in ran.err_lines[0] and "1 empty" in ran.err_lines[0]
    assert allowed.code == 0 and allowed.out == "done\n"
    assert any(line.startswith("rlmx: skipped 3 of 3 files") for line in allowed.err_lines)
    assert served == 2  # only the allowed run called the model


@pytest.mark.parametrize("case", ["empty-file", "empty-stdin", "include-matches-nothing"])
def test_other_empty_contexts_are_refused(shell: Any, tmp_path: Path, case: str) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# a\n")
    args = {
        "empty-file": ["-c", str(empty)],
        "empty-stdin": ["-c", "-"],
        "include-matches-nothing": ["-c", str(tmp_path / "docs"), "--include", "*.log"],
    }[case]
    with ScriptedServer(explore_then_final) as srv:
        ran = shell("ask", "q", *args, *model_args(srv))
        served = srv.requests
    assert ran.code == 2 and ran.out == "" and served == []
    assert ran.err_lines[0].startswith("rlmx: error: ") and "holds no usable text" in ran.err_lines[0]
