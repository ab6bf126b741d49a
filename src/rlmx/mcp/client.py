"""Connections to MCP servers, on the `mcp` SDK, held by an `McpHub`: one thread with its own event loop
that starts the servers, lists their tools, makes the calls and stops them.

A thread of its own means a server that hangs or floods can hold up only its own calls: every wait on
the hub is bounded (start-up, each call, the close), and the run's loop only waits on futures. Model
code never reaches a server: the host makes every call (rlmx.mcp.tools). Server-initiated requests
(sampling, elicitation, roots) are refused with a message naming the server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlmx.errors import RLMError
from rlmx.mcp.config import McpServer, minimal_env

log = logging.getLogger("rlmx.mcp")

MAX_TOOLS = 1_000  # per server: past this the listing stops (and says so)
MAX_PAGES = 50  # of tools/list
CLOSE_TIMEOUT_S = 5.0
STDERR_TAIL_CHARS = 300


class McpUnavailable(RLMError):
    """A server that did not start, or is no longer running; the message says why in one line."""


@dataclass
class Connection:
    server: McpServer
    session: Any = None
    tools: list[Any] = field(default_factory=list)
    truncated: bool = False
    dead: str | None = None  # why it stopped answering
    stop: asyncio.Event | None = None
    task: asyncio.Task[None] | None = None
    errlog: Any = None
    refusals: list[str] = field(default_factory=list)
    samplers: dict[int, Any] = field(default_factory=dict)  # of the calls under way (rlmx.mcp.sampling)

    def stderr_tail(self) -> str:
        if self.errlog is None:
            return ""
        try:
            self.errlog.flush()
            self.errlog.seek(0)
            text = self.errlog.read()[-STDERR_TAIL_CHARS:]
        except (OSError, ValueError):
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1] if lines else ""


def one_line(exc: BaseException) -> str:
    """An exception as one line, looking inside exception groups (anyio's task groups make them)."""
    while getattr(exc, "exceptions", None):  # a BaseExceptionGroup (3.11+, or the backport's)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(message).split())


class McpHub:
    """The MCP servers of one run, session or worker process. `start()` (blocking, bounded) connects
    to every server and returns one warning line per server that did not start; `call()` awaits a
    tool call from any event loop; `close()` stops them all."""

    def __init__(self, servers: list[McpServer], *, say: Callable[[str], None] | None = None) -> None:
        self.connections = {s.name: Connection(s) for s in servers}
        self.say = say or (lambda line: log.warning("%s", line))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.started = False
        self.closed = False

    # --- the hub's thread ----------------------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def main() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            self._thread = threading.Thread(target=main, name="rlmx-mcp", daemon=True)
            self._thread.start()
            ready.wait()
            self._loop = loop
        return self._loop

    def _submit(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())

    # --- start ---------------------------------------------------------------------------------------

    def start(self) -> list[str]:
        """Connect to every server (in parallel); a warning line for each one that did not start."""
        if self.started:
            return []
        self.started = True
        if not self.connections:
            return []
        longest = max(c.server.startup_timeout_s for c in self.connections.values())
        try:
            return list(self._submit(self._start_all()).result(longest + CLOSE_TIMEOUT_S + 5))
        except concurrent.futures.TimeoutError:  # a start that outran its own bound: said, never waited on
            late = [c for c in self.connections.values() if c.session is None and c.dead is None]
            for conn in late:
                conn.dead = "its start did not finish in time"
            return [f"MCP server {c.server.where()} did not start: {c.dead}" for c in late]

    async def _start_all(self) -> list[str]:
        results = await asyncio.gather(*(self._start(c) for c in self.connections.values()))
        return [line for line in results if line]

    async def _start(self, conn: Connection) -> str | None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        conn.stop = asyncio.Event()
        conn.task = asyncio.ensure_future(self._hold(conn, ready))
        server = conn.server
        if server.command is not None:
            conn.errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        try:
            await asyncio.wait_for(asyncio.shield(ready), server.startup_timeout_s)
        except asyncio.TimeoutError:
            ready.cancel()
            conn.dead = f"it did not answer within {server.startup_timeout_s:g} s (startup_timeout_s)"
            conn.task.cancel()
            await asyncio.wait({conn.task}, timeout=CLOSE_TIMEOUT_S)
        except Exception as exc:
            tail = conn.stderr_tail()
            conn.dead = one_line(exc) + (f"; its stderr: {tail}" if tail else "")
        if conn.dead:
            return (
                f"MCP server {server.where()} did not start: {conn.dead}; the run goes on without its tools"
            )
        if conn.truncated:
            self.say(
                f"MCP server {server.name!r} lists more than {MAX_TOOLS:,} tools; only the first {MAX_TOOLS:,} are used"
            )
        return None

    async def _hold(self, conn: Connection, ready: asyncio.Future[None]) -> None:
        """Open the connection, list the tools, and keep it open until `conn.stop` is set."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._open(conn, stack)
                session = await stack.enter_async_context(
                    refusing_session(conn.server.sampling)(
                        read,
                        write,
                        sampling_callback=self._sample(conn)
                        if conn.server.sampling
                        else self._refuse(conn, "sampling/createMessage"),
                        elicitation_callback=self._refuse(conn, "elicitation/create"),
                        list_roots_callback=self._refuse(conn, "roots/list"),
                    )
                )
                await session.initialize()
                conn.tools, conn.truncated = await list_all_tools(session)
                conn.session = session
                if not ready.done():
                    ready.set_result(None)
                assert conn.stop is not None
                await conn.stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else McpUnavailable(one_line(exc)))
            elif conn.dead is None and not isinstance(exc, asyncio.CancelledError):
                conn.dead = f"its connection failed: {one_line(exc)}"
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            conn.session = None

    async def _open(self, conn: Connection, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        server = conn.server
        if server.command is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env=minimal_env(server.env, os.environ),
                cwd=server.cwd,
            )
            streams = await stack.enter_async_context(stdio_client(params, errlog=conn.errlog))
        else:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            client = await stack.enter_async_context(create_mcp_http_client(headers=dict(server.headers)))
            assert server.url is not None
            streams = await stack.enter_async_context(streamable_http_client(server.url, http_client=client))
        return streams[0], streams[1]

    def _refuse(self, conn: Connection, method: str) -> Any:
        import mcp_types as types

        async def refuse(*_: Any) -> Any:
            line = (
                f"MCP server {conn.server.name!r} asked rlmx for {method}, which rlmx does not offer; refused"
            )
            conn.refusals.append(method)
            self.say(line)
            return types.ErrorData(
                code=types.INVALID_REQUEST, message=f"rlmx refuses {method}: this client does not offer it"
            )

        return refuse

    def _sample(self, conn: Connection) -> Any:
        import mcp_types as types

        async def sample(_context: Any, params: Any) -> Any:
            samplers = list(conn.samplers.values())
            if len(samplers) != 1:
                why = (
                    "no tool call of a run is under way"
                    if not samplers
                    else "several runs' calls are under way"
                )
                return types.ErrorData(code=types.INVALID_REQUEST, message=f"rlmx cannot sample now: {why}")
            try:
                return await samplers[0](params)
            except Exception as exc:
                return types.ErrorData(
                    code=types.INTERNAL_ERROR, message=f"rlmx could not sample: {one_line(exc)}"
                )

        return sample

    # --- calls ---------------------------------------------------------------------------------------

    def tools_of(self, name: str) -> list[Any]:
        conn = self.connections.get(name)
        return list(conn.tools) if conn is not None and conn.dead is None else []

    def running(self) -> list[str]:
        return [n for n, c in self.connections.items() if c.dead is None and c.session is not None]

    async def call(self, server: str, tool: str, arguments: dict[str, Any], sampler: Any = None) -> Any:
        """The `CallToolResult` of one call, awaited on the caller's loop; cancelling it cancels the call.
        `sampler`: what answers the server's sampling requests during the call (rlmx.mcp.sampling)."""
        future = self._submit(self._call(server, tool, arguments, sampler))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()
            raise

    async def _call(self, server: str, tool: str, arguments: dict[str, Any], sampler: Any = None) -> Any:
        conn = self.connections.get(server)
        if conn is None:
            raise McpUnavailable(f"there is no MCP server named {server!r}")
        if conn.dead is not None or conn.session is None:
            raise McpUnavailable(f"MCP server {server!r} is not running: {conn.dead or 'it was closed'}")
        token = id(asyncio.current_task())
        if sampler is not None:
            conn.samplers[token] = sampler
        try:
            return await conn.session.call_tool(tool, arguments)
        except Exception as exc:
            from mcp.shared.exceptions import MCPError
            from mcp_types import CONNECTION_CLOSED

            if isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED:
                raise McpUnavailable(
                    f"MCP server {server!r} answered {tool} with an error: {one_line(exc)}"
                ) from None
            tail = conn.stderr_tail()
            conn.dead = one_line(exc) + (f"; its stderr: {tail}" if tail else "")
            raise McpUnavailable(f"MCP server {server!r} failed during {tool}: {conn.dead}") from None
        finally:
            conn.samplers.pop(token, None)

    # --- close ---------------------------------------------------------------------------------------

    async def _stop(self, conn: Connection) -> None:
        if conn.stop is not None:
            conn.stop.set()
        task = conn.task
        if task is not None and not task.done():
            done, _ = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT_S)
            if not done:
                task.cancel()
                await asyncio.wait({task}, timeout=CLOSE_TIMEOUT_S)
        if conn.errlog is not None:
            conn.errlog.close()
            conn.errlog = None

    async def _stop_all(self) -> None:
        await asyncio.gather(*(self._stop(c) for c in self.connections.values()), return_exceptions=True)

    def close(self) -> None:
        """Stop every server and the hub's thread (bounded: a server that will not stop is left)."""
        if self.closed:
            return
        self.closed = True
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._stop_all(), loop).result(3 * CLOSE_TIMEOUT_S)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(CLOSE_TIMEOUT_S)

    async def aclose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)


def refusing_session(sampling: bool = False) -> Any:
    """A ClientSession that advertises no elicitation or roots, and no sampling unless `sampling` (so a
    well-behaved server never asks) while its callbacks still answer, with a refusal naming the method,
    a server that asks anyway. (The SDK advertises a capability whenever its callback is set;
    `_build_capabilities` is where.)"""
    from mcp.client.session import ClientSession

    class RefusingSession(ClientSession):
        def _build_capabilities(self, version: str) -> Any:
            capabilities = super()._build_capabilities(version)
            removed = {"elicitation": None, "roots": None, **({} if sampling else {"sampling": None})}
            return capabilities.model_copy(update=removed)

    return RefusingSession


async def list_all_tools(session: Any) -> tuple[list[Any], bool]:
    """Every tool the server lists (following the cursor), and whether the listing was cut at MAX_TOOLS."""
    import mcp_types as types

    tools: list[Any] = []
    cursor = None
    for _ in range(MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if len(tools) >= MAX_TOOLS:
            return tools[:MAX_TOOLS], True
        if not cursor:
            break
    return tools, bool(cursor)
