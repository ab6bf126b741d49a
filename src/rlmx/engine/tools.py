"""The host's side of the user's tools: one REPL's `tool` requests, checked, run and recorded.

A request comes from model code, so nothing in it is trusted: the tool's name must be one this REPL was
given, the arguments must be a JSON list and object under the size cap, and they are bound to the
function's real signature before it is called. A coroutine function runs on the run's loop; any other
callable in a thread of its own (a daemon thread: one stuck in a call can never hold up the run's exit or
the interpreter's). Each call is bounded by its timeout and by the run's working time; past either, the
model's code gets a `ToolError` at once and a sync tool's thread is left to finish, which the
`tool_call` record says. Any failure -- the tool raised, a result that is not JSON or too large, a
refusal -- is an `RLMError` whose message the code reads as the `ToolError`'s.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import threading
import time
from typing import TYPE_CHECKING, Any

from rlmx.errors import RLMError
from rlmx.tools import RunTools, Tool
from rlmx.trace.events import ToolCall, excerpt

if TYPE_CHECKING:
    from rlmx.engine.run_state import RunState

ARGUMENT_EXCERPT_CHARS = 500  # of a call's arguments and result, in its trace record
# (run state, depth, exec id) of the tool call under way in this task: what an MCP server's sampling
# request is charged to (rlmx.mcp.sampling)
CALLER: contextvars.ContextVar[tuple[Any, int, str] | None] = contextvars.ContextVar(
    "rlmx_tool_caller", default=None
)


class ToolFailed(RLMError):
    """A tool call that did not give a result; the message is what the model's code is told.
    `left_running`: a sync tool's thread is still in the call."""

    def __init__(self, message: str, *, left_running: bool = False) -> None:
        super().__init__(message)
        self.left_running = left_running


class ToolRunner:
    """Runs the tools of the REPL at `depth` for the model's code (`SubCalls.handle`'s `tool` method)."""

    def __init__(self, state: RunState, tools: RunTools, depth: int) -> None:
        self.state = state
        self.tools = tools
        self.depth = depth
        self.box = tools.at(depth)
        # one call at a time per REPL: its stubs wait for each answer, and forged frames wait here too
        self.one_at_a_time = asyncio.Lock()

    async def call(self, params: dict[str, Any], exec_id: str) -> Any:
        asked = params.get("name")
        tool = self.box.functions().get(asked) if isinstance(asked, str) else None
        if tool is None:
            raise ToolFailed(f"there is no tool named {asked!r} in this REPL")
        name = str(asked)
        started = time.monotonic()
        args, kwargs = params.get("args", []), params.get("kwargs", {})
        arguments = json.dumps({"args": args, "kwargs": kwargs}, ensure_ascii=False, default=str)
        record = {"name": name, "arguments": excerpt(arguments, ARGUMENT_EXCERPT_CHARS)}
        trace_fields = getattr(tool, "trace_fields", None)  # an MCP tool's server and tool (rlmx.mcp)
        if trace_fields is not None and isinstance(args, list) and isinstance(kwargs, dict):
            record.update(trace_fields(args, kwargs))
        CALLER.set((self.state, self.depth, exec_id))
        try:
            self._check_arguments(name, args, kwargs, arguments)
            async with self.one_at_a_time:
                value = await self._run(name, tool, args, kwargs)
            text = self._result_text(name, value)
        except ToolFailed as exc:
            self._emit(exec_id, record, started, error=str(exc), left_running=exc.left_running)
            raise
        except asyncio.CancelledError:  # the run's time is up (or it was cancelled): still recorded
            why = "cancelled: the run ended while the tool was running"
            self._emit(exec_id, record, started, error=why, left_running=not tool.is_async)
            raise
        self._emit(exec_id, record, started, result=excerpt(text, ARGUMENT_EXCERPT_CHARS))
        return json.loads(text)  # a copy: the REPL never holds (even in-process) the host's object

    def _check_arguments(self, name: str, args: Any, kwargs: Any, arguments: str) -> None:
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ToolFailed(f"{name}: malformed call (args must be a list and kwargs an object)")
        if len(arguments.encode("utf-8")) > self.tools.max_bytes:
            raise ToolFailed(
                f"{name}: the arguments are {len(arguments.encode('utf-8')):,} bytes as JSON; the limit is "
                f"{self.tools.max_bytes:,}"
            )

    async def _run(self, name: str, tool: Tool, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """The tool's value, or ToolFailed."""
        try:
            inspect.signature(tool.fn).bind(*args, **kwargs)
        except TypeError as exc:
            raise ToolFailed(f"{name}(): {exc}") from None
        except ValueError:
            pass  # no readable signature: the call itself will say
        timeout = self._timeout(name, tool)
        if tool.is_async:
            work: asyncio.Future[Any] = asyncio.ensure_future(tool.fn(*args, **kwargs))
        else:
            work = in_thread(tool.fn, args, kwargs, name=f"rlmx-tool-{name}")
        try:
            value = await asyncio.wait_for(asyncio.shield(work), timeout)
            if inspect.isawaitable(value):  # a sync callable that returned a coroutine
                value = await asyncio.wait_for(value, timeout)
        except asyncio.TimeoutError:
            work.cancel()  # a coroutine stops here; a thread cannot, and is left to finish
            raise ToolFailed(
                f"{name} did not return within {timeout:g} s and was abandoned",
                left_running=not tool.is_async,
            ) from None
        except asyncio.CancelledError:
            work.cancel()
            raise
        except ToolFailed:
            raise
        except Exception as exc:
            raise ToolFailed(f"{name} raised {type(exc).__name__}: {exc}") from None
        return value

    def _timeout(self, name: str, tool: Tool) -> float:
        timeout = tool.timeout_s or self.tools.timeout_s
        remaining = self.state.ledger.remaining_s()
        if remaining is not None:
            if remaining <= 0:
                raise ToolFailed(f"{name} was not called: the run has no working time left")
            timeout = min(timeout, remaining)
        return timeout

    def _result_text(self, name: str, value: Any) -> str:
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ToolFailed(
                f"{name} returned a {type(value).__name__}, which cannot be sent back as JSON ({exc}); "
                "a tool must return str, int, float, bool, None, or lists and dicts of them"
            ) from None
        size = len(text.encode("utf-8"))
        if size > self.tools.max_bytes:
            raise ToolFailed(
                f"{name} returned {size:,} bytes as JSON; the limit is {self.tools.max_bytes:,}: ask for less"
            )
        return text

    def _emit(
        self,
        exec_id: str,
        record: dict[str, Any],
        started: float,
        *,
        result: Any = None,
        error: str | None = None,
        left_running: bool = False,
    ) -> None:
        self.state.emitter.emit(
            ToolCall(
                parent_id=exec_id,
                depth=self.depth,
                duration_s=round(time.monotonic() - started, 4),
                ok=error is None,
                error=error,
                result=result,
                thread_left_running=left_running,
                **record,
            )
        )


def in_thread(fn: Any, args: list[Any], kwargs: dict[str, Any], *, name: str) -> asyncio.Future[Any]:
    """`fn(*args, **kwargs)` in a new daemon thread; its outcome settles the returned future on this
    loop (or nowhere, once the loop is gone: nobody waits for an abandoned call)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(ok: bool, outcome: Any) -> None:
        if future.done():
            return
        if ok:
            future.set_result(outcome)
        else:
            future.set_exception(outcome)

    def target() -> None:
        try:
            outcome, ok = context.run(fn, *args, **kwargs), True
        except BaseException as exc:  # whatever the tool raises is the model's to read
            outcome, ok = (exc if isinstance(exc, Exception) else RuntimeError(repr(exc))), False
        try:
            loop.call_soon_threadsafe(settle, ok, outcome)
        except RuntimeError:
            pass  # the loop closed: the run ended without this call

    threading.Thread(target=target, name=name, daemon=True).start()
    return future
