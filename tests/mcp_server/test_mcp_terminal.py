"""`rlmx mcp` started by hand in a terminal: one line says what it is and how to register it, and Ctrl-C
exits at once (130, no traceback); under a client (stdin a pipe) it prints nothing."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")

ARGS = [sys.executable, "-m", "rlmx", "mcp", "--model", "openai:scripted", "--base-url", "http://127.0.0.1:9"]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}


def _read_until(fd: int, needle: bytes, seconds: float) -> bytes:
    out = b""
    deadline = time.monotonic() + seconds
    while needle not in out and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    return out


def test_in_a_terminal_it_says_what_it_is_and_ctrl_c_exits(tmp_path: Path) -> None:
    master, slave = os.openpty()
    proc = subprocess.Popen(
        ARGS, stdin=slave, stdout=slave, stderr=slave, env=_env(tmp_path), start_new_session=True
    )
    os.close(slave)
    try:
        seen = _read_until(master, b"\n", 30)
        text = seen.decode(errors="replace")
        assert "waiting for an MCP client" in text, text
        assert "claude mcp add rlmx -- rlmx mcp" in text and '"mcpServers"' in text
        time.sleep(0.5)  # the server is now blocked reading stdin
        os.kill(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=5)
        rest = _read_until(master, b"interrupted", 2).decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert code == 130
    assert "Traceback" not in text + rest
    assert "interrupted" in rest


def test_under_a_client_stdin_a_pipe_it_prints_nothing(tmp_path: Path) -> None:
    proc = subprocess.run(ARGS, input=b"", capture_output=True, env=_env(tmp_path), timeout=60)
    assert "waiting for an MCP client" not in proc.stderr.decode()
    assert "claude mcp add" not in proc.stderr.decode()
