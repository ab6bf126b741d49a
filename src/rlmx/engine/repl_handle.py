"""A node's REPL, from the host's side: started beside the first model call, waited for only when code
first needs it, cancelled if nothing ever does, and closed with the node -- or, for a session's REPL
(`keep=True`), kept for the next question and closed with the session (`shutdown`)."""

from __future__ import annotations

import asyncio
from typing import Any

from rlmx.context.payload import ContextPayload
from rlmx.sandbox.base import ExecResult, RpcHandler, Sandbox
from rlmx.sandbox.frames import ReplOptions


class ReplHandle:
    def __init__(self, sandbox: Sandbox, *, keep: bool = False) -> None:
        self.sandbox = sandbox
        self.keep = keep  # a session's REPL: `close` leaves it running
        self.alive = False  # started and not closed: code can run, variables can be read
        self.starting: asyncio.Future[None] | None = None
        self.busy = False  # a cell is running
        self.dropped = 0  # times a kept REPL was stopped mid-cell and started afresh

    def start(self, payload: ContextPayload, options: ReplOptions | None = None) -> None:
        """Start the REPL (and load the context) without waiting for it; a kept REPL already started
        (or starting) is left as it is."""
        if self.alive or self.starting is not None:
            return
        self.starting = asyncio.ensure_future(self.sandbox.start(payload, options))

    async def ready(self) -> None:
        """Wait for the start begun by `start`; a failed start raises SandboxError."""
        if self.starting is not None:
            starting = self.starting
            try:
                await starting
            finally:
                self.starting = None
            self.alive = True

    @property
    def context_stats(self) -> dict[str, Any] | None:
        stats = getattr(self.sandbox, "context_stats", None)
        return stats if isinstance(stats, dict) else None

    @property
    def isolation(self) -> dict[str, Any]:
        """Where the REPL's code runs, as its sandbox reports it (`SandboxReady`'s fields)."""
        report = getattr(self.sandbox, "isolation", None)
        if callable(report):
            found = report()
            if isinstance(found, dict):
                return found
        return {"layer": "local", "worker_ids": "none"}

    @property
    def restarts(self) -> int:
        """How many times the sandbox restarted a crashed or stopped worker (its variables were lost)."""
        return int(getattr(self.sandbox, "restarts", 0))

    async def execute(self, code: str, rpc: RpcHandler, history_append: list[dict[str, Any]]) -> ExecResult:
        await self.ready()
        self.busy = True
        result = await self.sandbox.execute(code, rpc, history_append)
        self.busy = False
        return result

    async def get_var(self, name: str) -> dict[str, Any] | None:
        """The variable's value as the worker encodes it, or None when the REPL is not running."""
        await self.ready()
        if not self.alive:
            return None
        return await self.sandbox.get_var(name)

    async def put(self, name: str, payload: ContextPayload) -> None:
        """A session's value under a reserved name, now and in every REPL started later."""
        if self.starting is not None:
            await self.ready()
        await self.sandbox.put(name, payload)

    async def close(self) -> str | None:
        """The node is done with its REPL. A kept one stays (unless a cell was cut off: its state is
        unknown, so it is stopped and the next question starts a new one); otherwise `shutdown`."""
        if not self.keep:
            return await self.shutdown()
        if self.busy:
            self.busy = False
            self.dropped += 1
            await self.shutdown()
        return None

    async def shutdown(self) -> str | None:
        """Stop a start nobody waited for (e.g. FINAL on the first turn) and close the REPL; returns the
        start's error, if it failed unseen."""
        self.alive = False
        problem = None
        if self.starting is not None:
            if not self.starting.done():  # what it made so far goes with the sandbox and the pool
                self.starting.cancel()
            await asyncio.wait([self.starting])
            if not self.starting.cancelled() and self.starting.exception() is not None:
                problem = f"REPL start: {self.starting.exception()}"
            self.starting = None
        await self.sandbox.close()
        return problem
