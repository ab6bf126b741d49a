"""`rlmx mcp` over stdio, driven by the official `mcp` client session, backed by the scripted model."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from policies import question, repl, turn
from rlmx.testing import ScriptedServer
from serve_helpers import Router, rlmx_serve


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(Router()) as srv:
        yield srv


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("mcp")
    (base / "project" / "docs").mkdir(parents=True)
    (base / "project" / "docs" / "a.txt").write_text("alpha " * 10)
    (base / "project" / "docs" / "b.txt").write_text("beta " * 20)
    (base / "project" / "src").mkdir()
    (base / "project" / "src" / "main.py").write_text("print('hi')\n")
    (base / "secret.txt").write_text("outside the root")
    (base / "project" / "void").mkdir()
    (base / "project" / "void" / "empty.txt").write_text("")
    (base / "project" / "void" / "image.bin").write_bytes(b"\x89PNG\x00\x00" * 50)
    return base


def server_params(srv: ScriptedServer, root: Path, *extra: str) -> StdioServerParameters:
    args = ["-m", "rlmx.cli", "mcp", "--root", str(root / "project"), "--model", "openai:scripted"]
    env = {**os.environ, "XDG_STATE_HOME": str(root / "state")}
    return StdioServerParameters(command=sys.executable, args=[*args, "--base-url", srv.url, *extra], env=env)


def session(
    srv: ScriptedServer,
    root: Path,
    body: Callable[[Client], Awaitable[Any]],
    *,
    client_roots: list[Path] | None = None,
) -> Any:
    async def list_roots(context: Any) -> mcp_types.ListRootsResult:
        assert client_roots is not None
        return mcp_types.ListRootsResult(
            roots=[mcp_types.Root(uri=p.as_uri(), name=p.name) for p in client_roots]
        )

    async def go() -> Any:
        extra: dict[str, Any] = {"list_roots_callback": list_roots} if client_roots is not None else {}
        async with Client(server_params(srv, root), read_timeout_seconds=120, **extra) as client:
            return await body(client)

    return asyncio.run(go())


def text_of(result: mcp_types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, mcp_types.TextContent))


def test_lists_the_tools_with_their_arguments(model_server: ScriptedServer, root: Path) -> None:
    tools = session(model_server, root, lambda c: c.list_tools()).tools
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"ask", "trace"}
    ask = by_name["ask"].input_schema
    assert set(ask["properties"]) == {
        "question",
        "paths",
        "text",
        "model",
        "max_depth",
        "budget_usd",
        "session",
    }
    assert ask["required"] == ["question"]
    assert str(root / "project") in (by_name["ask"].description or "")  # the allowed roots are announced


def test_ask_about_a_folder_answers_with_usage_trace_and_progress(
    model_server: ScriptedServer, root: Path
) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def body(client: Client) -> tuple[mcp_types.CallToolResult, mcp_types.CallToolResult]:
        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, total, message))

        answer = await client.call_tool(
            "ask", {"question": "list the documents", "paths": ["docs"]}, progress_callback=on_progress
        )
        run_id = re.search(r"-([0-9a-f]{12})\.jsonl", text_of(answer)).group(1)
        summary = await client.call_tool("trace", {"run": run_id, "turns": True})
        return answer, summary

    answer, summary = session(model_server, root, body)
    assert not answer.is_error, text_of(answer)
    text = text_of(answer)
    found, _, footer = text.partition("\n\n---\n")
    assert json.loads(found) == {"docs/a.txt": 60, "docs/b.txt": 100}
    assert re.search(r"\d+ model calls · [\d,]+ tokens · .* · 2 turns · .* stopped by final", footer)
    trace_path = Path(footer.split("trace: ", 1)[1].strip())
    assert trace_path.is_file() and trace_path.is_relative_to(root / "state")
    messages = [m for _, _, m in progress]
    assert any(m and m.startswith("turn 1:") for m in messages) and any(
        "run ended (final)" in (m or "") for m in messages
    )
    assert [v for v, _, _ in progress] == sorted(v for v, _, _ in progress)  # progress only goes up
    assert not summary.is_error
    assert "question: list the documents" in text_of(summary) and "stopped by final after 2 turns" in text_of(
        summary
    )
    assert "turn 1: docs = context" in text_of(summary)


@pytest.mark.parametrize(
    "path", ["../secret.txt", "SECRET", "docs/../../secret.txt"], ids=["dotdot", "absolute", "nested-dotdot"]
)
def test_paths_outside_the_roots_are_refused(model_server: ScriptedServer, root: Path, path: str) -> None:
    path = path.replace("SECRET", str(root / "secret.txt"))
    result = session(
        model_server, root, lambda c: c.call_tool("ask", {"question": "list the documents", "paths": [path]})
    )
    assert result.is_error
    assert "outside the allowed roots" in text_of(result) or "'..' part" in text_of(result)
    assert "outside the root" not in text_of(result)  # nothing of the file's content


def test_client_roots_narrow_what_may_be_read(model_server: ScriptedServer, root: Path) -> None:
    async def body(client: Client) -> tuple[mcp_types.CallToolResult, mcp_types.CallToolResult]:
        inside = await client.call_tool("ask", {"question": "list the documents", "paths": ["docs"]})
        outside = await client.call_tool("ask", {"question": "list the documents", "paths": ["src/main.py"]})
        return inside, outside

    inside, outside = session(model_server, root, body, client_roots=[root / "project" / "docs"])
    assert not inside.is_error
    assert json.loads(text_of(inside).split("\n\n---\n")[0]) == {"docs/a.txt": 60, "docs/b.txt": 100}
    assert outside.is_error and "outside the allowed roots" in text_of(outside)


def test_inline_text_needs_no_roots_and_bad_profiles_are_tool_errors(
    model_server: ScriptedServer, root: Path
) -> None:
    async def body(client: Client) -> tuple[mcp_types.CallToolResult, ...]:
        inline = await client.call_tool("ask", {"question": "list the documents", "text": "some words"})
        unknown = await client.call_tool("ask", {"question": "say hello", "model": "rlmx/nope"})
        listing = await client.call_tool("trace", {})
        escape = await client.call_tool("trace", {"run": "/etc/passwd"})
        return inline, unknown, listing, escape

    inline, unknown, listing, escape = session(model_server, root, body)
    assert json.loads(text_of(inline).split("\n\n---\n")[0]) == {"single": 10}
    assert unknown.is_error and "rlmx/scripted" in text_of(unknown)
    assert "most recent traces" in text_of(listing)
    assert escape.is_error and "only traces in" in text_of(escape)


def test_streamable_http_transport_on_loopback(model_server: ScriptedServer, root: Path) -> None:
    command = [sys.executable, "-m", "rlmx.cli", "mcp", "--transport", "http", "--port", "0"]
    command += ["--root", str(root / "project"), "--model", "openai:scripted", "--base-url", model_server.url]

    async def go(url: str) -> mcp_types.CallToolResult:
        async with Client(url, read_timeout_seconds=120) as client:
            return await client.call_tool("ask", {"question": "list the documents", "paths": ["docs/a.txt"]})

    with rlmx_serve(command=command, env={"XDG_STATE_HOME": str(root / "state")}) as server:
        result = asyncio.run(go(server.url))
    assert not result.is_error, text_of(result)
    assert json.loads(text_of(result).split("\n\n---\n")[0]) == {"single": 60}
    refused = subprocess.run(
        [*command[:-4], "--host", "0.0.0.0", "--model", "openai:x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "loopback only" in refused.stderr


def fake_trace(folder: Path, run_id: str, question: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"20261201T000000-{run_id}.jsonl"
    path.write_text(json.dumps({"type": "run_start", "run_id": run_id, "question": question}) + "\n")
    return path


def test_the_trace_tool_reads_only_the_mcp_servers_own_trace_folder(
    model_server: ScriptedServer, root: Path
) -> None:
    state = root / "state" / "rlmx"
    served = fake_trace(state / "serve-traces", "5e5e5e5e5e5e", "another caller's question")
    asked = fake_trace(state / "traces", "a5a5a5a5a5a5", "a question from rlmx ask")
    (state / "mcp-traces").mkdir(parents=True, exist_ok=True)
    link = state / "mcp-traces" / "20261201T000000-1c1c1c1c1c1c.jsonl"
    link.symlink_to(served)  # a link out of the folder is not followed

    async def body(client: Client) -> list[mcp_types.CallToolResult]:
        answer = await client.call_tool("ask", {"question": "say hello"})
        calls = [answer, await client.call_tool("trace", {})]
        for run in ["5e5e5e5e5e5e", "a5a5a5a5a5a5", "1c1c1c1c1c1c", str(served), link.name, str(asked)]:
            calls.append(await client.call_tool("trace", {"run": run}))
        return calls

    answer, listing, *refused = session(model_server, root, body)
    trace_path = Path(text_of(answer).split("trace: ", 1)[1].strip())
    assert trace_path.parent == state / "mcp-traces"  # the MCP server's runs go to its own folder
    listed = text_of(listing)
    assert trace_path.name in listed and "another caller" not in listed and "rlmx ask" not in listed
    assert "1c1c1c1c1c1c" not in listed
    for result in refused:
        assert result.is_error, text_of(result)
        assert "another caller" not in text_of(result) and "from rlmx ask" not in text_of(result)
    assert [bool(re.search(r"no trace (with run id|file)|only traces in", text_of(r))) for r in refused] == [
        True
    ] * len(refused)


def test_trace_dir_option_moves_the_folder_the_tools_use(
    model_server: ScriptedServer, root: Path, tmp_path: Path
) -> None:
    params = server_params(model_server, root, "--trace-dir", str(tmp_path / "mine"))

    async def go() -> tuple[mcp_types.CallToolResult, mcp_types.CallToolResult]:
        async with Client(params, read_timeout_seconds=120) as client:
            answer = await client.call_tool("ask", {"question": "say hello"})
            return answer, await client.call_tool("trace", {})

    answer, listing = asyncio.run(go())
    trace_path = Path(text_of(answer).split("trace: ", 1)[1].strip())
    assert trace_path.parent == tmp_path / "mine" and trace_path.name in text_of(listing)
    assert str(tmp_path / "mine") in text_of(listing)


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ({"paths": ["void/empty.txt"]}, "every file and text in it is empty or only whitespace"),
        ({"paths": ["void"]}, "every file and text in it is empty or only whitespace"),
        ({"paths": ["void/image.bin"]}, "is a binary file"),
        ({"text": "  \n "}, "every file and text in it is empty or only whitespace"),
    ],
    ids=["empty-file", "folder-of-empty-and-binary", "binary-file", "blank-text"],
)
def test_a_context_with_no_usable_text_is_a_tool_error_before_any_model_call(
    model_server: ScriptedServer, root: Path, args: dict[str, Any], why: str
) -> None:
    model_server.reset()
    result = session(
        model_server, root, lambda c: c.call_tool("ask", {"question": "list the documents", **args})
    )
    assert result.is_error and why in text_of(result), text_of(result)
    assert len(text_of(result).splitlines()) == 1
    assert model_server.requests == []  # refused before any model call


def test_an_http_port_out_of_range_is_a_usage_error() -> None:
    command = [sys.executable, "-m", "rlmx.cli", "mcp", "--transport", "http", "--port", "70000"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "--port" in done.stderr and "65535" in done.stderr


def session_policy(messages: list[dict[str, Any]], request: Any) -> str:
    """Questions of a session: one sets a variable, the next reads it with the context it brought."""
    if request.purpose == "final":
        return "FINAL(forced)"
    if request.purpose != "root":
        return "sub reply"
    asked, t = question(messages).splitlines()[0], turn(messages)
    if asked == "remember seven":
        return repl("kept = 7") if t == 0 else "FINAL(stored)"
    if asked == "recall":
        return repl("FINAL(str(kept) + ':' + context_1)")
    return "FINAL(unscripted)"


def test_ask_with_a_session_keeps_the_repl_and_is_bounded(root: Path) -> None:
    async def body(client: Client) -> list[mcp_types.CallToolResult]:
        first = await client.call_tool("ask", {"question": "remember seven", "text": "one", "session": "new"})
        sid = re.search(r"^session: ([0-9a-f]{32})$", text_of(first), re.MULTILINE).group(1)
        second = await client.call_tool("ask", {"question": "recall", "text": "two", "session": sid})
        run_id = re.search(r"-([0-9a-f]{12})\.q2\.jsonl", text_of(second)).group(1)
        summary = await client.call_tool("trace", {"run": run_id})
        crowded = await client.call_tool("ask", {"question": "remember seven", "session": "new"})
        unknown = await client.call_tool("ask", {"question": "recall", "session": "f" * 32})
        return [first, second, summary, crowded, unknown]

    async def go(srv: ScriptedServer) -> list[mcp_types.CallToolResult]:
        params = server_params(srv, root, "--max-sessions", "1")
        async with Client(params, read_timeout_seconds=120) as client:
            return await body(client)

    with ScriptedServer(session_policy) as srv:
        first, second, summary, crowded, unknown = asyncio.run(go(srv))
    assert not first.is_error and text_of(first).startswith("stored\n")
    sid = re.search(r"^session: (\S+)$", text_of(first), re.MULTILINE).group(1)
    assert not second.is_error and text_of(second).startswith("7:two\n")  # its text is context_1
    assert f"session: {sid}" in text_of(second)
    assert not summary.is_error and "question: recall" in text_of(summary)
    assert crowded.is_error and "too many open sessions" in text_of(crowded)
    assert unknown.is_error and "no open session" in text_of(unknown)


def test_an_idle_mcp_session_expires(root: Path) -> None:
    async def go(srv: ScriptedServer) -> tuple[mcp_types.CallToolResult, mcp_types.CallToolResult]:
        async with Client(server_params(srv, root, "--session-idle-s", "0.5"), read_timeout_seconds=120) as c:
            first = await c.call_tool("ask", {"question": "remember seven", "text": "one", "session": "new"})
            sid = re.search(r"^session: (\S+)$", text_of(first), re.MULTILINE).group(1)
            await asyncio.sleep(1.5)
            return first, await c.call_tool("ask", {"question": "recall", "text": "two", "session": sid})

    with ScriptedServer(session_policy) as srv:
        first, late = asyncio.run(go(srv))
    assert not first.is_error
    assert late.is_error and "no open session" in text_of(late) and "expired" in text_of(late)
