"""`Interpreter`: DSPy's CodeInterpreter protocol over rlmx's isolated REPL worker.

The worker is a bare REPL (`rlmx.sandbox.bare`): DSPy owns its namespace, and finds there only its
tools, `SUBMIT` and the variables it passes. Each `execute` sends what changed (the tools and output
fields, the variables as values) and then the code; tool calls come back across the worker's bridge and
run here, each in a thread of its own under the caller's context variables (so `dspy.context(lm=...)`
reaches a nested sub-agent), a coroutine to its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import json
import platform
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from rlmx.context.payload import ContextPayload
from rlmx.errors import ConfigError, InvalidSettings, RLMError, SandboxError, SandboxRefused
from rlmx.integrations.dspy import values
from rlmx.integrations.dspy.classes import (
    CodeExecutionError,
    CodeInterpreterError,
    FinalOutput,
    with_callbacks,
)
from rlmx.integrations.dspy.runtime import NO_CONTEXT, runtime
from rlmx.sandbox import frames
from rlmx.sandbox.base import ExecResult, SandboxSettings
from rlmx.sandbox.process import ProcessSandbox
from rlmx.tools import Tool

LOST = "interpreter state was lost; create a new interpreter for a fresh session"


class Refused(RLMError):
    """The worker refused a definition or a value (a bad name, a value it cannot decode)."""


class ToolFailed(RLMError):
    """A tool call that failed on the host: the worker's code sees a RuntimeError with this message."""


class Interpreter:
    """DSPy's CodeInterpreter, running code in native CPython in rlmx's isolated worker.

    `tools`: host functions by name (a coroutine function too), callable from the code by keyword or
    position; `output_fields`: SUBMIT's fields ([{"name", "type"?}], None: `SUBMIT(output)`); both may be
    changed between calls, as `dspy.RLM` does. `sandbox`: the worker's isolation and limits
    (`SandboxSettings`; a process backend: "process", the default, "process-namespaces",
    "process-landlock" or "process-unisolated"). `execution_timeout`: seconds one execute's code may run
    (time in tools not counted; default the sandbox's `cell_timeout_s`); past it the session ends.
    `callbacks`: DSPy callbacks of this interpreter.
    """

    execution_instructions: ClassVar[str] = (
        f"Python runs as native CPython {platform.python_version()} in an isolated worker process: no "
        "network, a read-only view of the system's public files (the host's private folders hidden), a small "
        "private working directory. State persists across executions. The standard library and the Python "
        "packages installed beside the host's Python can be imported. Host tools and SUBMIT are global "
        "functions; their arguments and results cross as JSON."
    )

    def __init__(
        self,
        tools: dict[str, Callable[..., Any]] | None = None,
        output_fields: list[dict[str, Any]] | None = None,
        *,
        sandbox: SandboxSettings | None = None,
        execution_timeout: float | None = None,
        callbacks: list[Any] | None = None,
    ) -> None:
        settings = sandbox or SandboxSettings(output_chars=100_000)
        if execution_timeout is not None:
            if not execution_timeout > 0:
                raise InvalidSettings("Interpreter: execution_timeout must be > 0 seconds (or None)")
            settings = dataclasses.replace(settings, cell_timeout_s=float(execution_timeout))
        if settings.backend == "local":
            raise ConfigError(
                "Interpreter: sandbox backend 'local' runs code in this process, which is no sandbox; use a "
                "process backend (the default 'process', or 'process-unisolated' for no isolation layer)"
            )
        self.tools: dict[str, Callable[..., Any]] = dict(tools or {})
        self.output_fields = output_fields
        self._tools_registered = False  # dspy.RLM clears it when it changes the tools
        self._defined: tuple[Any, ...] | None = None
        try:
            self._definition()
        except CodeInterpreterError as exc:
            raise InvalidSettings(f"Interpreter: {exc}") from None
        self.sandbox_settings = settings
        self.callbacks = list(callbacks or [])
        self._sent: dict[str, Any] = {}  # variable name -> the str last sent (bound again, not re-sent)
        self._sandbox: ProcessSandbox | None = None
        self._ended = False
        self._lock = threading.Lock()
        self._tool_threads: set[int] = set()

    # --- life cycle ---------------------------------------------------------------------------------
    @with_callbacks
    def start(self) -> None:
        """Start the worker (idempotent); a session that ended cannot be started again."""
        if self._ended:
            raise CodeInterpreterError(f"rlmx Interpreter: the session has ended; {LOST}")
        if self._sandbox is None:
            self._sandbox = runtime().run(self._start())

    async def _start(self) -> ProcessSandbox:
        rt = runtime()
        options = frames.ReplOptions(bare=True)
        for attempt in (1, 2):  # a zygote that died since its last fork is replaced once
            pool = rt.pool(self.sandbox_settings)
            sandbox = ProcessSandbox(self.sandbox_settings, pool=pool)
            try:
                await sandbox.start(NO_CONTEXT, options)
                return sandbox
            except SandboxError as exc:
                await rt.drop(self.sandbox_settings, pool)
                if attempt == 2:
                    raise CodeInterpreterError(
                        f"rlmx Interpreter: the worker could not start: {exc}"
                    ) from exc
        raise AssertionError("unreachable")

    @with_callbacks
    def shutdown(self) -> None:
        """Stop the worker; its state is gone, and this interpreter is not used again."""
        self._ended = True
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            with contextlib.suppress(RuntimeError):  # the process is exiting: its zygote takes the worker
                runtime().run(sandbox.close())

    def __enter__(self) -> Interpreter:
        self.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.shutdown()

    def __call__(self, code: str, variables: dict[str, Any] | None = None) -> Any:
        return self.execute(code, variables)

    def _lost(self, why: str, cause: BaseException | None = None) -> Exception:
        """End the session: the worker (and its state) is gone."""
        self.shutdown()
        error = CodeInterpreterError(f"rlmx Interpreter: {why}; {LOST}")
        error.__cause__ = cause
        return error

    # --- execute ------------------------------------------------------------------------------------
    @with_callbacks
    def execute(self, code: str, variables: dict[str, Any] | None = None) -> Any:
        """Run `code` with `variables` bound: FinalOutput (SUBMIT), the trailing expression's value, the
        printed output, or None. The code's errors raise SyntaxError or CodeExecutionError; a lost worker
        ends the session with CodeInterpreterError."""
        if threading.get_ident() in self._tool_threads:
            raise CodeInterpreterError("rlmx Interpreter cannot execute recursively from one of its tools")
        if not self._lock.acquire(blocking=False):
            raise CodeInterpreterError("rlmx Interpreter already has an active execution (one at a time)")
        try:
            return self._execute(code, variables)
        finally:
            self._lock.release()

    def _execute(self, code: str, variables: dict[str, Any] | None) -> Any:
        if self._ended:
            raise CodeInterpreterError(f"rlmx Interpreter: the session has ended; {LOST}")
        if not isinstance(code, str):
            raise CodeInterpreterError(f"code must be a str, not {type(code).__name__}")
        if variables is not None and not isinstance(variables, dict):
            raise CodeInterpreterError("variables must be a dict of names to values")
        sends = self._variables(variables or {})
        definition = self._definition()
        self.start()
        context = contextvars.copy_context()
        try:
            result = runtime().run(self._run(code, sends, definition, context))
        except (KeyboardInterrupt, SystemExit):
            self.shutdown()  # the cell was stopped half-way: its worker is not used again
            raise
        except (EOFError, ConnectionError, BrokenPipeError, asyncio.TimeoutError) as exc:
            raise self._lost("the worker stopped answering", exc) from exc
        except Refused as exc:
            raise CodeInterpreterError(f"rlmx Interpreter: {exc}") from exc
        except SandboxError as exc:
            raise self._lost(str(exc), exc) from exc
        if result.timed_out:
            limit = self.sandbox_settings.cell_timeout_s
            raise self._lost(f"the code exceeded execution timeout of {limit:g} seconds and was stopped")
        if result.restarted:
            raise self._lost(result.error or "the worker was restarted")
        return self._outcome(result)

    def _variables(self, variables: dict[str, Any]) -> list[tuple[str, ContextPayload | None]]:
        """What to send of each variable (None: the str sent last time, bound again), checked first."""
        sends: list[tuple[str, ContextPayload | None]] = []
        for name, value in variables.items():
            values.check_name(name)
            if name in self.tools:
                raise CodeInterpreterError(f"Invalid variable name: {name!r} is a tool's name")
            if isinstance(value, str) and self._sent.get(name) is value:
                sends.append((name, None))
            else:
                sends.append((name, values.payload(value)))
        return sends

    def _definition(self) -> tuple[Any, ...] | None:
        """The tools and output fields to define in the worker, when they changed (else None)."""
        for name in self.tools:
            values.check_name(name, "tool")
        key = (tuple((name, id(fn)) for name, fn in self.tools.items()), _fields_key(self.output_fields))
        if self._tools_registered and key == self._defined:
            return None
        specs = [Tool(fn).spec(name) for name, fn in self.tools.items()]
        fields = self.output_fields
        if fields is not None and not (isinstance(fields, list) and all(isinstance(f, dict) for f in fields)):
            raise CodeInterpreterError('output_fields must be a list of {"name": ..., "type"?: ...} dicts')
        outputs = [
            {"name": values.check_name(f.get("name"), "output field")} for f in self.output_fields or []
        ]
        return key, specs, outputs or None

    async def _run(
        self,
        code: str,
        sends: list[tuple[str, ContextPayload | None]],
        definition: tuple[Any, ...] | None,
        context: contextvars.Context,
    ) -> ExecResult:
        sandbox = self._sandbox
        if sandbox is None:
            raise EOFError("the worker is gone")
        try:
            if definition is not None:
                key, specs, outputs = definition
                await sandbox.define(specs, outputs)
                self._defined, self._tools_registered = key, True
            for name, payload in sends:
                if payload is not None:
                    self._sent.pop(name, None)
                await sandbox.assign(name, payload)
                if payload is not None and payload.text is not None:
                    self._sent[name] = payload.text
        except SandboxRefused as exc:  # the worker turned it down and goes on (anything else: lost)
            raise Refused(str(exc)) from None

        async def rpc(method: str, params: dict[str, Any]) -> Any:
            return await self._tool_call(method, params, context)

        return await sandbox.execute(code, rpc)

    def _outcome(self, result: ExecResult) -> Any:
        final = result.final or {}
        kind = final.get("kind")
        if kind == "submit":
            return FinalOutput(final.get("json"))
        if kind == "raised":
            raise _error(final.get("json") or {}, result.output)
        if kind == "value":
            return final["json"] if "json" in final else final.get("text")
        return result.output or None

    # --- tools --------------------------------------------------------------------------------------
    async def _tool_call(self, method: str, params: dict[str, Any], context: contextvars.Context) -> Any:
        name, args, kwargs = params.get("name"), params.get("args"), params.get("kwargs")
        if method != "tool":
            raise ToolFailed(f"CodeInterpreterError: {method} is not offered here; only the tools are")
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ToolFailed("CodeInterpreterError: a tool call needs a list of args and a dict of kwargs")
        if not isinstance(name, str) or name not in self.tools:
            raise ToolFailed(f"CodeInterpreterError: Unknown tool: {name}")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()

        def settle(outcome: Any, failed: BaseException | None) -> None:
            if not done.done():
                (done.set_exception(failed) if failed is not None else done.set_result(outcome))

        def call() -> None:
            self._tool_threads.add(threading.get_ident())
            try:
                outcome = values.tool_result(self.invoke_tool(name, args, kwargs))
            except BaseException as exc:  # SystemExit too: the code's error, never the loop's
                loop.call_soon_threadsafe(settle, None, ToolFailed(f"{type(exc).__name__}: {exc}"))
            else:
                loop.call_soon_threadsafe(settle, outcome, None)
            finally:
                self._tool_threads.discard(threading.get_ident())

        threading.Thread(
            target=context.copy().run, args=(call,), name=f"rlmx-tool-{name}", daemon=True
        ).start()
        return await done

    @with_callbacks
    def invoke_tool(self, tool_name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Call one of `tools` (a coroutine is run to its end): what the worker's code gets, before JSON."""
        if tool_name not in self.tools:
            raise CodeInterpreterError(f"Unknown tool: {tool_name}")
        return _finished(self.tools[tool_name](*args, **kwargs))


def _finished(result: Any) -> Any:
    """A coroutine's result, run to its end here (this thread has no loop of its own)."""
    if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
        return asyncio.run(_awaited(result))
    return result


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _fields_key(fields: Any) -> str:
    try:
        return json.dumps(fields, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        return repr(fields)


def _error(raised: dict[str, Any], output: str) -> BaseException:
    """The code's error as DSPy's interpreters raise it: SyntaxError, else CodeExecutionError."""
    kind, message = str(raised.get("type") or "Error"), str(raised.get("message") or "")
    trace = str(raised.get("traceback") or f"{kind}: {message}")
    if raised.get("syntax"):
        return SyntaxError(f"Invalid Python syntax. message: {trace}")
    text = trace if "line " in trace else f"{kind}: {message}"
    if output.strip():
        text += f"\n\nOutput before the error:\n{output.rstrip()}"
    return CodeExecutionError(text)


class InterpreterFactory:
    """A zero-argument callable making `Interpreter`s with these settings, for `interpreter_factory=`
    (DSPy refuses an interpreter there: each call needs a fresh one)."""

    execution_instructions: ClassVar[str] = Interpreter.execution_instructions

    def __init__(
        self,
        sandbox: SandboxSettings | None = None,
        execution_timeout: float | None = None,
        callbacks: list[Any] | None = None,
    ) -> None:
        self.sandbox, self.execution_timeout, self.callbacks = sandbox, execution_timeout, callbacks
        Interpreter(sandbox=sandbox, execution_timeout=execution_timeout)  # the settings, checked now

    def __call__(self) -> Interpreter:
        return Interpreter(
            sandbox=self.sandbox, execution_timeout=self.execution_timeout, callbacks=self.callbacks
        )

    def __repr__(self) -> str:
        return f"InterpreterFactory(sandbox={self.sandbox!r}, execution_timeout={self.execution_timeout!r})"


def interpreter_factory(
    sandbox: SandboxSettings | None = None,
    *,
    execution_timeout: float | None = None,
    callbacks: list[Any] | None = None,
) -> InterpreterFactory:
    """`dspy.RLM(..., interpreter_factory=interpreter_factory(SandboxSettings(memory_mb=...)))`: a factory
    whose interpreters take these settings (see `Interpreter`)."""
    return InterpreterFactory(sandbox, execution_timeout, callbacks)
