"""`rlmx ask` and its base URL: one that is not a URL is bad usage (exit 2, before any request), a
loopback port with nothing listening is a run error naming the URL, `$OPENAI_BASE_URL` reaches a keyless
server as `--base-url` does; and a model with no price says "cost unknown" in every progress line and
`cost_usd: null` in its JSON, failed runs included."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rlmx.errors import ConfigError
from rlmx.spec.options import RunOptions, build_spec
from rlmx.testing import Fault, ScriptedServer

RLMX = [sys.executable, "-m", "rlmx.cli"]


def rlmx(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    full.update({"COLUMNS": "200", **(env or {})})
    return subprocess.run([*RLMX, *args], capture_output=True, text=True, env=full, timeout=120)


def err_lines(ran: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in ran.stderr.splitlines() if line.strip()]


@pytest.fixture()
def context(tmp_path: Path) -> str:
    path = tmp_path / "notes.txt"
    path.write_text("line one\nline two\n")
    return str(path)


def answer(messages: list[dict[str, Any]], request: Any) -> str:
    return "FINAL(done)"


@pytest.mark.parametrize("url", ["not-a-url", "ftp://example.com/v1", "http://", "http://[::1/v1"])
def test_a_base_url_that_is_not_a_url_is_refused(url: str, context: str) -> None:
    with pytest.raises(ConfigError, match=r"^`base_url`=.* is not a URL"):
        build_spec(RunOptions(model="openai:x", base_url=url))
    ran = rlmx("ask", "q", "-c", context, "--model", "openai:x", "--base-url", url)
    assert ran.returncode == 2, ran.stderr
    assert err_lines(ran) == [
        f"rlmx: error: --base-url {url} is not a URL: give one like http://127.0.0.1:8080/v1"
    ]


def test_a_loopback_port_with_nothing_listening_is_a_run_error_naming_the_url(context: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    ran = rlmx("ask", "q", "-c", context, "--model", "openai:x", "--base-url", url, "--json")
    assert ran.returncode == 1, ran.stderr
    last = err_lines(ran)[-1]
    assert last.startswith("rlmx: error: model call failed: openai:x at " + url), last
    assert "connection refused" in last and "after 2 attempts" in ran.stderr
    assert json.loads(ran.stdout)["usage"]["cost_usd"] is None  # openai:x has no price


def test_openai_base_url_reaches_a_keyless_server_and_an_unpriced_cost_is_unknown(context: str) -> None:
    with ScriptedServer(answer) as srv:
        ran = rlmx(
            "ask",
            "q",
            "-c",
            context,
            "--model",
            "openai:scripted",
            "--json",
            env={"OPENAI_BASE_URL": srv.url},
        )
        served = srv.served
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["answer"] == "done" and served >= 1
    assert out["usage"]["cost_usd"] is None
    progress = [line for line in err_lines(ran) if line.startswith("[rlmx ")]
    assert progress and all("cost unknown" in line and "$" not in line for line in progress), progress


def test_a_failed_run_of_an_unpriced_model_says_cost_unknown_everywhere(context: str) -> None:
    with ScriptedServer(answer, faults=lambda request: Fault.status(400)) as srv:
        ran = rlmx("ask", "q", "-c", context, "--model", "openai:scripted", "--base-url", srv.url, "--json")
    assert ran.returncode == 1, ran.stderr
    out = json.loads(ran.stdout)
    assert out["stopped_by"] == "error" and out["usage"]["calls"] == 1
    assert out["usage"]["cost_usd"] is None
    assert out["usage"]["by_model"]["openai:scripted"]["cost_usd"] is None
    progress = [line for line in err_lines(ran) if line.startswith("[rlmx ")]
    assert progress and all("cost unknown" in line and "$" not in line for line in progress), progress
