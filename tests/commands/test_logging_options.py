"""-v/--verbose and --log-level: rlmx's log on stderr, declared once for every long-running command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from policies import repl
from rlmx.testing import ScriptedServer

SCRIPTED = "openai:scripted"
LINE = "rlmx.run: run "  # the run's start line (model, endpoint, trace), logged at INFO


def ask(url: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = ["ask", "What is it?", "--context", "-", "--model", SCRIPTED, "--base-url", url, "--quiet"]
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    return subprocess.run(
        [sys.executable, "-m", "rlmx", *args, *extra],
        input="some context",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.fixture(scope="module")
def server():  # type: ignore[no-untyped-def]
    with ScriptedServer(lambda messages, request: repl("FINAL('done')")) as srv:
        yield srv


def test_verbose_shows_rlmx_log_lines_absent_without_it(server: ScriptedServer, tmp_path: Path) -> None:
    plain = ask(server.url, tmp_path)
    verbose = ask(server.url, tmp_path, "-v")
    assert plain.returncode == verbose.returncode == 0, plain.stderr + verbose.stderr
    assert LINE not in plain.stderr
    assert LINE in verbose.stderr and f"model {SCRIPTED}@{server.url}" in verbose.stderr
    assert plain.stdout == verbose.stdout  # the answer is unchanged; the log goes to stderr


def test_log_level_sets_the_threshold(server: ScriptedServer, tmp_path: Path) -> None:
    assert LINE in ask(server.url, tmp_path, "--log-level", "INFO").stderr
    assert LINE not in ask(server.url, tmp_path, "-v", "--log-level", "warning").stderr


def test_a_bad_level_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = ask("http://127.0.0.1:9", tmp_path, "--log-level", "loud")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "'loud' is not one of debug, info" in proc.stderr


@pytest.mark.parametrize("command", ["ask", "chat", "batch", "serve", "mcp", "eval"])
def test_every_long_running_command_takes_both(command: str) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "rlmx", command, "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0 and "--verbose" in proc.stdout and "-v " in proc.stdout
    assert "--log-level" in proc.stdout and "LEVEL" in proc.stdout
