"""The sandbox seam: start / execute / get_var / close, behind one small protocol."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

# An RPC handler answers the worker's requests (llm_query & co.). It returns a JSON-able result, or
# raises BudgetExhausted / ModelError, which the worker sees as an exception in the model's code.
RpcHandler = Callable[[str, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class SandboxSettings:
    """How model-written code runs. `backend`: "process" (default) or "local" (unsafe, in-process)."""

    backend: str = "process"
    cell_timeout_s: float = 120.0  # wall-clock time of a cell, not counting time spent in sub-calls
    output_chars: int = 20_000  # printed output returned to the model, head + tail
    start_timeout_s: float = 30.0


@dataclass(frozen=True)
class ContextPayload:
    """The context, encoded once for the worker (never re-encoded per turn or per restart)."""

    kind: str  # "inline-text" | "inline-json" | "files" (a JSON manifest; the worker reads the files) | "none"
    blob: bytes = b""
    # For the worker, sent in INIT as `context_options`: "prefilter" ({query, method, k}), "cache_dir"
    # (where search indexes may be cached), "note" (a line the model's metadata ends with).
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, context: Any) -> ContextPayload:
        if context is None:
            return cls("none")
        if isinstance(context, str):
            return cls("inline-text", context.encode("utf-8"))
        return cls("inline-json", json.dumps(context, ensure_ascii=False, default=str).encode("utf-8"))


@dataclass
class ExecResult:
    output: str
    error: str | None = None
    final: dict[str, Any] | None = None  # {"kind": "final"|"final_var", "text"|"json": ...}
    restarted: bool = False
    timed_out: bool = False
    duration_s: float = 0.0
    rpc_calls: int = 0
    notes: list[str] = field(default_factory=list)


class Sandbox(Protocol):
    """A REPL holding the context. Implementations: ProcessSandbox (default), LocalSandbox (unsafe)."""

    async def start(self, payload: ContextPayload) -> None: ...

    async def execute(
        self, code: str, rpc: RpcHandler, history_append: list[dict[str, Any]] | None = None
    ) -> ExecResult: ...

    async def get_var(self, name: str) -> dict[str, Any]: ...

    async def close(self) -> None: ...
