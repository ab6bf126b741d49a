"""The event loop DSPy's interpreters share: one thread of its own, and one zygote per sandbox settings.

DSPy calls an interpreter synchronously, from any thread, also from inside a running event loop
(`RLM.aforward`). The sandboxes' asyncio code runs on this loop instead, and the caller waits for it.
Every interpreter with the same `SandboxSettings` forks its worker from one zygote (a few ms, instead
of a zygote's start-up each time), which is stopped when the process exits."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from rlmx.context.payload import ContextPayload
from rlmx.sandbox.base import SandboxSettings
from rlmx.sandbox.pool import WorkerPool

T = TypeVar("T")
NO_CONTEXT = ContextPayload("none")  # one object: every worker forked for it inherits the zygote's


class Runtime:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="rlmx-dspy-loop", daemon=True)
        self.thread.start()
        self.pools: dict[SandboxSettings, WorkerPool] = {}  # touched on the loop only

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the loop and wait for its result (from any thread but the loop's own)."""
        if threading.current_thread() is self.thread or not self.thread.is_alive():
            coro.close()
            raise RuntimeError("rlmx.integrations.dspy: the interpreters' event loop is not available here")
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:  # KeyboardInterrupt while waiting: the coroutine stops too
            future.cancel()
            raise

    def pool(self, settings: SandboxSettings) -> WorkerPool:
        """The zygote of these settings (on the loop)."""
        pool = self.pools.get(settings)
        if pool is None:
            pool = self.pools[settings] = WorkerPool(settings)
        return pool

    async def drop(self, settings: SandboxSettings, pool: WorkerPool) -> None:
        """Forget a zygote that failed (the next interpreter starts a new one)."""
        if self.pools.get(settings) is pool:
            del self.pools[settings]
        await pool.close()

    async def _close_pools(self) -> None:
        pools, self.pools = list(self.pools.values()), {}
        for pool in pools:
            await pool.close()

    def close(self) -> None:
        if self.thread.is_alive():
            try:
                self.run(self._close_pools())
            finally:
                self.loop.call_soon_threadsafe(self.loop.stop)
                self.thread.join(timeout=5)


_RUNTIME: Runtime | None = None
_LOCK = threading.Lock()


def runtime() -> Runtime:
    global _RUNTIME
    with _LOCK:
        if _RUNTIME is None:
            _RUNTIME = Runtime()
            atexit.register(_RUNTIME.close)
        return _RUNTIME


def close_runtime() -> None:
    """Stop the shared zygotes and the loop thread now (else at exit); the next interpreter starts anew."""
    global _RUNTIME
    with _LOCK:
        current, _RUNTIME = _RUNTIME, None
    if current is not None:
        atexit.unregister(current.close)
        current.close()


def _forget_in_child() -> None:
    """A forked child has no loop thread: it starts its own runtime when it needs one."""
    global _RUNTIME, _LOCK
    _RUNTIME, _LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
