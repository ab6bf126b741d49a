"""rlmx's MCP client against real MCP servers nobody here wrote: `mcp-server-time` from PyPI (stdio) and
`@modelcontextprotocol/server-everything` from npm (stdio and streamable HTTP), each installed by
benchmarks/peers/setup.py into benchmarks/.venvs/ on first use. A download: the `peers` group; under
CI=true a failed install fails the test."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_support import output_of, repl, scripted_run, tool_calls
from test_mcp_http import free_port, wait_for_port

pytestmark = pytest.mark.peers

ROOT = Path(__file__).resolve().parents[2]
VENVS = ROOT / "benchmarks" / ".venvs"
TIME = VENVS / "mcp-time" / "bin" / "mcp-server-time"
EVERYTHING = VENVS / "mcp-everything" / "node_modules" / ".bin" / "mcp-server-everything"


def installed(peer: str, program: Path) -> Path:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "peers" / "setup.py"), peer],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    if proc.returncode != 0 or not program.exists():
        why = f"{peer} could not be installed: {(proc.stdout + proc.stderr).strip().splitlines()[-3:]}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true: {why}")
        pytest.skip(why)
    return program


@pytest.fixture(scope="module")
def time_server() -> Path:
    return installed("mcp-time", TIME)


@pytest.fixture(scope="module")
def everything() -> Path:
    return installed("mcp-everything", EVERYTHING)


def test_mcp_server_time_from_pypi_over_stdio(time_server: Path) -> None:
    code = """
        now = time_get_current_time(timezone="UTC")
        print(type(now).__name__, sorted(now))
        moved = time_convert_time(source_timezone="UTC", time="12:00", target_timezone="Asia/Tokyo")
        print(moved["target"]["datetime"][11:16])
        try:
            time_get_current_time(timezone="Mars/Olympus_Mons")
        except ToolError as exc:
            print("ToolError:", exc)
    """
    servers = {"time": {"command": str(time_server), "args": ["--local-timezone", "UTC"]}}
    result, events, _ = scripted_run([repl(code), "FINAL_VAR(now)"], servers)
    assert result.error is None and result.answer["timezone"] == "UTC"
    assert result.answer["datetime"][:10] == datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    out = output_of(events)
    assert "dict ['datetime', 'day_of_week', 'is_dst', 'timezone']" in out and "\n21:00" in out
    assert (
        "ToolError: MCP tool 'get_current_time' of server 'time' failed:" in out
        and "Mars/Olympus_Mons" in out
    )
    assert [(t.name, t.server, t.mcp_tool) for t in tool_calls(events)] == [
        ("time_get_current_time", "time", "get_current_time"),
        ("time_convert_time", "time", "convert_time"),
        ("time_get_current_time", "time", "get_current_time"),
    ]


CHECKS = """
    print("sum", everything_get_sum(a=1.5, b=2))
    print("echo", everything_echo(message="hi"))
    print("image", everything_get_tiny_image())
    print("links", len(everything_get_resource_links(count=2)))
    env = everything_get_env()
    print("provider key seen:", "OPENAI_API_KEY" in str(env), "token seen:", "mcp-test-token" in str(env))
    try:
        everything_get_sum(a="one", b=2)
    except ToolError as exc:
        print("ToolError:", exc)
    print("offers sampling tool:", "everything_trigger_sampling_request" in globals())
"""


def check_everything(events: list[object]) -> None:
    out = output_of(events)  # type: ignore[arg-type]
    assert "sum The sum of 1.5 and 2 is 3.5." in out, out
    assert "echo Echo: hi" in out
    assert "image [\"Here's the image you requested:\", '[image image/png, about" in out
    assert "not shown in the REPL]" in out
    assert "links 3" in out  # a text block and the two links
    assert (
        "ToolError: everything_get_sum: the arguments do not match the tool's input schema: `a`: 'one' is not of type 'number'"
        in out
    )
    # rlmx advertises no sampling, so the server does not offer its tool that would ask for it
    assert "offers sampling tool: False" in out


def test_server_everything_from_npm_over_stdio(everything: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-reach-the-server")
    servers = {
        "everything": {"command": str(everything), "args": ["stdio"], "env": {"TOKEN": "mcp-test-token"}}
    }
    result, events, _ = scripted_run([repl(CHECKS), "FINAL(ok)"], servers)
    assert result.answer == "ok"
    check_everything(events)
    assert "provider key seen: False token seen: True" in output_of(events)


@pytest.fixture()
def everything_http(everything: Path) -> Iterator[str]:
    port = free_port()
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "PORT": str(port)}
    proc = subprocess.Popen(
        [str(everything), "streamableHttp"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def test_server_everything_from_npm_over_streamable_http(everything_http: str) -> None:
    servers = {"everything": {"type": "http", "url": everything_http}}
    result, events, _ = scripted_run([repl(CHECKS), "FINAL(ok)"], servers)
    assert result.answer == "ok"
    check_everything(events)


def test_server_everything_with_sampling_opted_in_samples_the_runs_sub_model(everything: Path) -> None:
    servers = {"everything": {"command": str(everything), "args": ["stdio"], "sampling": True}}
    code = "print(everything_trigger_sampling_request(prompt='hello', maxTokens=20))"
    result, events, model = scripted_run([repl(code), "FINAL(ok)"], servers)
    out = output_of(events)
    assert "sub-answer" in out and result.answer == "ok", out
    assert ("llm_query", 1) in model.purposes
