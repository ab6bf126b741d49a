"""A streamable HTTP MCP server (the own-SDK server of servers/small.py run with `http PORT`): tools over
HTTP, `headers` with `${VAR}` sent to the server and kept out of the worker, a server that is not there."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from mcp_support import SMALL, output_of, repl, scripted_run, tool_calls


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the HTTP MCP server exited with {proc.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the HTTP MCP server did not listen on {port} within {seconds:g} s")


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, SMALL, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def test_tools_over_streamable_http_with_headers_from_the_environment(
    http_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_HTTP_TOKEN", "bearer-secret-77")
    code = """
        print(small_add(1, b=2), len(small_show_header("Authorization")), small_show_header("X-Plain"))
        needle = "bearer-" + "secret"
        print("in worker:", any(needle in repr(v) for k, v in globals().items() if k != "needle"))
    """
    servers = {
        "small": {
            "type": "http",
            "url": http_url,
            "headers": {"Authorization": "Bearer ${MCP_HTTP_TOKEN}", "X-Plain": "${MCP_UNSET_VAR:-plain}"},
        }
    }
    result, events, _ = scripted_run([repl(code), "FINAL(ok)"], servers)
    out = output_of(events)
    assert "3 23 plain" in out and "in worker: False" in out, out
    assert [(t.server, t.mcp_tool) for t in tool_calls(events)] == [
        ("small", "add"),
        ("small", "show_header"),
        ("small", "show_header"),
    ]
    assert result.answer == "ok"


def test_an_http_server_that_is_not_there_is_one_line() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    result, events, _ = scripted_run(["FINAL(ok)"], {"gone": {"url": url, "startup_timeout_s": 10}})
    warnings = next(e for e in events if type(e).__name__ == "RunStart").warnings
    assert len(warnings) == 1 and warnings[0].startswith(f"MCP server 'gone' ({url}) did not start: "), (
        warnings
    )
    assert result.answer == "ok"
