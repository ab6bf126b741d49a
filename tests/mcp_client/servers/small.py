"""A small MCP server on the `mcp` SDK for rlmx's tests: `python small.py [stdio|http PORT] [MODE]`.

MODE picks a fault: `ok` (default), `fail` (exits before answering), `hang` (never answers), `crash`
(`crash_now` kills the process mid-call), `huge` (`huge_text` returns megabytes), `many` (300 tools),
`ask` (`ask_model` sends sampling/elicitation/roots requests back)."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

mode = (
    sys.argv[3]
    if len(sys.argv) > 3
    else (sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "stdio" else "ok")
)
if mode == "fail":
    sys.stderr.write("small server: cannot open its database\n")
    sys.exit(3)
if mode == "hang":
    time.sleep(3600)

from mcp.server.mcpserver import Context, MCPServer  # noqa: E402

server = MCPServer("small")


@server.tool()
def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b


@server.tool(name="echo-text")
def echo_text(text: str, times: int = 1) -> str:
    """Repeat a text."""
    return text * times


@server.tool()
def show_env(name: str) -> str:
    """The server's environment variable `name` ('' when unset)."""
    return os.environ.get(name, "")


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def show_header(name: str, ctx: Context) -> str:
    """The HTTP request's header `name` ('' over stdio or when absent)."""
    return str((ctx.headers or {}).get(name.lower(), ""))


@server.tool()
def fails(why: str) -> str:
    """Always fails with `why`."""
    raise ValueError(why)


@server.tool()
def protocol_error() -> str:
    """Answers with a JSON-RPC error instead of a result."""
    from mcp.shared.exceptions import MCPError

    raise MCPError(-32602, "the server refuses: quota exceeded")


@server.tool()
def crash_now() -> str:
    """Kills the server process."""
    os._exit(9)


@server.tool()
def huge_text(megabytes: int = 3) -> str:
    """A text of `megabytes` MB."""
    return "x" * (megabytes * 1_000_000)


@server.tool()
def slow(seconds: float) -> str:
    """Sleeps."""
    time.sleep(seconds)
    return "done"


@server.tool()
async def ask_model(question: str, ctx: Context) -> str:
    """Asks the client for sampling."""
    from mcp_types import SamplingMessage, TextContent

    try:
        result = await ctx.session.create_message(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=question))],
            max_tokens=10,
        )
        return f"sampled: {result}"
    except Exception as exc:
        return f"refused: {exc}"


if mode == "many":

    def numbered(i: int) -> Any:
        def tool(x: int = 0) -> int:
            return x + i

        return tool

    for i in range(300):
        server.add_tool(numbered(i), name=f"t{i:03d}", description=f"tool number {i}")

if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
