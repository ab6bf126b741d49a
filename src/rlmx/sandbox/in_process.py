"""The `local` backend -- UNSAFE: model-written code runs inside this very process.

Nothing is isolated: the code can read every file and environment variable this process can (API keys
included), open network connections, and kill the process. Use it only for trusted code and for
debugging (breakpoints, profilers). It is never the default; `--sandbox local` selects it.

Each REPL runs its cells in a thread of its own; printed output is captured per thread, so REPLs
running at the same time never see each other's output. A cell past its timeout gets a TimeoutError
raised inside it (pure Python code stops; code stuck in a C call cannot be stopped, and the REPL is
replaced while that thread is abandoned).
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TextIO

from rlmx.context.payload import ContextPayload, load_payload
from rlmx.errors import BudgetExhausted, RLMError, SandboxError
from rlmx.repl import syntax
from rlmx.sandbox import frames
from rlmx.sandbox.base import ExecResult, RpcHandler, SandboxSettings
from rlmx.sandbox.process import RESTART_NOTE, var_reply
from rlmx.sandbox.worker import BudgetExhaustedError, CappedWriter, SubcallError, Worker

_routes: dict[int, CappedWriter] = {}  # thread id -> the capture of the cell that thread runs


class _ThreadRouter:
    """Installed once as sys.stdout / sys.stderr: a cell's thread writes to its capture, others pass."""

    def __init__(self, fallback: TextIO) -> None:
        self.fallback = fallback

    def write(self, s: str) -> int:
        target = _routes.get(threading.get_ident())
        return target.write(s) if target is not None else self.fallback.write(s)

    def flush(self) -> None:
        if threading.get_ident() not in _routes:
            self.fallback.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fallback, name)


def _install_router() -> None:
    import sys

    if not isinstance(sys.stdout, _ThreadRouter):
        sys.stdout = _ThreadRouter(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, _ThreadRouter):
        sys.stderr = _ThreadRouter(sys.stderr)  # type: ignore[assignment]


async def _call(handler: RpcHandler, method: str, params: dict[str, Any]) -> Any:
    return await handler(method, params)


class InProcessWorker(Worker):
    """The worker's REPL, with RPCs made as direct calls into the host's event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(-1, -1)
        self.loop = loop
        self.handler: RpcHandler | None = None
        self.rpc_s = 0.0  # time spent in host RPCs during the current cell
        self.rpc_active = 0
        self.rpc_calls = 0
        self.rpc_changed = asyncio.Event()
        self.thread_id = 0

    def rpc(self, method: frames.Method, params: dict[str, Any]) -> Any:
        if not self.in_cell or self.handler is None:
            raise RuntimeError(f"{method} can only be called while a cell is running")
        if method not in frames.RPC_METHODS:
            raise RuntimeError(f"unknown REPL request {method!r}")
        started = time.monotonic()
        self.rpc_active += 1
        self.rpc_calls += 1
        try:
            call = _call(self.handler, method, params)  # a coroutine object; it runs in the loop
            return asyncio.run_coroutine_threadsafe(call, self.loop).result()
        except BudgetExhausted as exc:
            raise BudgetExhaustedError(str(exc)) from None
        except RLMError as exc:
            raise SubcallError(str(exc)) from None
        finally:
            self.rpc_s += time.monotonic() - started
            self.rpc_active -= 1
            self.loop.call_soon_threadsafe(self.rpc_changed.set)

    def redirect(self, out: CappedWriter) -> Any:
        self.thread_id = threading.get_ident()
        _routes[self.thread_id] = out
        return self.thread_id

    def restore(self, saved: Any) -> None:
        _routes.pop(int(saved), None)


class InProcessSandbox:
    """UNSAFE in-process REPL (see the module's docstring)."""

    def __init__(self, settings: SandboxSettings | None = None) -> None:
        self.settings = settings or SandboxSettings(backend="local")
        self.payload = ContextPayload("none")
        self.options = frames.ReplOptions()
        self.history: list[dict[str, Any]] = []
        self.worker: InProcessWorker | None = None
        self.executor: ThreadPoolExecutor | None = None
        self.restarts = 0
        self.extras: dict[str, ContextPayload] = {}  # a session's values, put into every new REPL

    async def start(self, payload: ContextPayload, options: frames.ReplOptions | None = None) -> None:
        _install_router()
        syntax.install()  # the cells and the host parse in threads of this one process
        self.payload = payload
        self.options = options or frames.ReplOptions()
        self._new_worker()

    def _new_worker(self) -> None:
        worker = InProcessWorker(asyncio.get_running_loop())
        settings = frames.WorkerSettings(self.options, self.settings.output_chars, cell_cpu_s=0)
        init = frames.Init(self.payload.kind, self.payload.options, settings, list(self.history))
        worker.init(init, self.payload.data())
        for name, payload in self.extras.items():
            worker.repl.put(name, load_payload(payload).value)
        self.worker = worker
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="rlmx-local-repl")

    async def execute(
        self, code: str, rpc: RpcHandler, history_append: list[dict[str, Any]] | None = None
    ) -> ExecResult:
        if self.worker is None or self.executor is None:
            raise SandboxError("the sandbox is not running")
        worker = self.worker
        worker.handler, worker.rpc_s, worker.rpc_calls = rpc, 0.0, 0
        self.history.extend(history_append or [])
        worker.repl.extend_history(history_append or [])
        started = time.monotonic()
        budget = self.settings.cell_timeout_s
        cell = asyncio.wrap_future(self.executor.submit(worker.run_cell, code))
        while not cell.done():
            worker.rpc_changed.clear()
            left = budget - (time.monotonic() - started - worker.rpc_s)
            if worker.rpc_active or left > 0:
                changed = asyncio.ensure_future(worker.rpc_changed.wait())
                await asyncio.wait(
                    {cell, changed},  # type: ignore[type-var]
                    timeout=None if worker.rpc_active else left,
                    return_when="FIRST_COMPLETED",
                )
                changed.cancel()
                continue
            return await self._stop_cell(cell, worker, started, budget)
        result = self._result(cell.result(), started)
        result.rpc_calls = worker.rpc_calls
        return result

    async def _stop_cell(
        self, cell: asyncio.Future[frames.ExecResult], worker: InProcessWorker, started: float, budget: float
    ) -> ExecResult:
        message = f"TimeoutError: the cell ran longer than {budget:g} s and was stopped"
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(worker.thread_id), ctypes.py_object(TimeoutError)
        )
        done, _ = await asyncio.wait({cell}, timeout=2.0)
        if done:
            result = self._result(cell.result(), started)
            result.error, result.timed_out = f"{message} (variables are kept)", True
            return result
        # stuck in C code: abandon the thread and start a fresh REPL
        assert self.executor is not None
        self.executor.shutdown(wait=False)
        self.restarts += 1
        self._new_worker()
        return ExecResult(
            output="",
            error=f"{message}; {RESTART_NOTE}",
            restarted=True,
            timed_out=True,
            duration_s=time.monotonic() - started,
        )

    @staticmethod
    def _result(reply: frames.ExecResult, started: float) -> ExecResult:
        return ExecResult(
            output=reply.output,
            error=reply.error,
            final=reply.final,
            duration_s=time.monotonic() - started,
            variables=list(reply.variables),
        )

    async def put(self, name: str, payload: ContextPayload) -> None:
        """A session's value put into the REPL (see ProcessSandbox.put)."""
        if payload.kind not in frames.PUT_KINDS:
            raise SandboxError(f"a value put into a live REPL cannot be of kind {payload.kind!r}")
        if name == "history":
            self.history = []
        else:
            self.extras[name] = payload
        if self.worker is not None:
            self.worker.repl.put(name, load_payload(payload).value)

    async def get_var(self, name: str) -> dict[str, Any]:
        if self.worker is None:
            raise SandboxError("the sandbox is not running")
        return var_reply(self.worker.get_var(name))

    async def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=False)
        self.worker, self.executor = None, None


class InProcessSandboxes:
    """The sandboxes of one run on the local backend (nothing is shared between them)."""

    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings

    def __call__(self) -> InProcessSandbox:
        return InProcessSandbox(self.settings)

    async def aclose(self) -> None:
        return None
