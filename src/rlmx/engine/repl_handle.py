"""A node's REPL, from the host's side: started beside the first model call, waited for only when code
first needs it, cancelled if nothing ever does, and closed with the node."""

from __future__ import annotations

import asyncio
from typing import Any

from rlmx.context.payload import ContextPayload
from rlmx.sandbox.base import ExecResult, RpcHandler, Sandbox


class ReplHandle:
    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.alive = False  # started and not closed: code can run, variables can be read
        self.starting: asyncio.Future[None] | None = None

    def start(self, payload: ContextPayload) -> None:
        """Start the REPL (and load the context) without waiting for it."""
        self.starting = asyncio.ensure_future(self.sandbox.start(payload))

    async def ready(self) -> None:
        """Wait for the start begun by `start`; a failed start raises SandboxError."""
        if self.starting is not None:
            starting, self.starting = self.starting, None
            await starting
            self.alive = True

    @property
    def context_stats(self) -> dict[str, Any] | None:
        stats = getattr(self.sandbox, "context_stats", None)
        return stats if isinstance(stats, dict) else None

    async def execute(self, code: str, rpc: RpcHandler, history_append: list[dict[str, Any]]) -> ExecResult:
        await self.ready()
        return await self.sandbox.execute(code, rpc, history_append)

    async def get_var(self, name: str) -> dict[str, Any] | None:
        """The variable's value as the worker encodes it, or None when the REPL is not running."""
        await self.ready()
        if not self.alive:
            return None
        return await self.sandbox.get_var(name)

    async def close(self) -> str | None:
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
