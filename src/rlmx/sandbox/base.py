"""The sandbox seam: start / execute / get_var / close, behind one small protocol."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlmx.context.payload import ContextPayload
from rlmx.errors import InvalidSettings
from rlmx.sandbox.frames import ReplOptions

# An RPC handler answers the worker's requests (llm_query & co.). It returns a JSON-able result, which
# reaches the model's code as it is, or raises BudgetExhausted / another RLMError, which the model's
# code sees as an exception.
RpcHandler = Callable[[str, dict[str, Any]], Awaitable[Any]]


BACKENDS = ("process", "process-unisolated", "local")


@dataclass(frozen=True)
class SandboxSettings:
    """How model-written code runs, and the limits of each REPL process (see docs/security.md).

    `backend`: "process" (default: an isolated worker process; refuses to run where it cannot isolate),
    "process-unisolated" (a worker process without namespaces: an explicit, recorded reduction), or
    "local" (UNSAFE: in this process, for trusted code and debugging only).
    """

    backend: str = "process"
    cell_timeout_s: float = 120.0  # wall-clock time of a cell, not counting time spent in sub-calls
    output_chars: int = 20_000  # printed output returned to the model, head + tail
    start_timeout_s: float = 30.0
    cell_cpu_s: int = 120  # CPU seconds a cell may use (RLIMIT_CPU soft limit, moved at every cell)
    worker_cpu_s: int = 3_600  # CPU seconds over a REPL process's life (RLIMIT_CPU hard limit)
    memory_mb: int = 4_096  # address space the code may add beyond the loaded context (RLIMIT_AS)
    max_processes: int = 128  # processes and threads of a REPL's user (RLIMIT_NPROC)
    max_file_mb: int = 256  # the largest file the code may write (RLIMIT_FSIZE)
    max_open_files: int = 256  # RLIMIT_NOFILE
    scratch_mb: int = 256  # size of the REPL's working directory (a private tmpfs)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise InvalidSettings(
                f"SandboxSettings: unknown backend {self.backend!r}; use one of {', '.join(BACKENDS)}"
            )
        for name in ("cell_timeout_s", "start_timeout_s", "output_chars", "cell_cpu_s", "worker_cpu_s"):
            if getattr(self, name) <= 0:
                raise InvalidSettings(f"SandboxSettings: {name} must be > 0")
        for name in ("memory_mb", "max_processes", "max_file_mb", "max_open_files", "scratch_mb"):
            if getattr(self, name) < 16:
                raise InvalidSettings(f"SandboxSettings: {name} must be >= 16")


@dataclass
class ExecResult:
    output: str
    error: str | None = None
    final: dict[str, Any] | None = None  # {"kind": "final"|"final_var", "text"|"json": ...}
    restarted: bool = False
    timed_out: bool = False
    duration_s: float = 0.0
    rpc_calls: int = 0
    variables: list[str] = field(
        default_factory=list
    )  # the REPL's plain variables (when the dialect lists them)


class Sandbox(Protocol):
    """A REPL holding the context. Implementations: ProcessSandbox (default), InProcessSandbox (unsafe)."""

    # `options`: the REPL's dialect, the user's tools, whether it is a session's (None: the defaults)
    async def start(self, payload: ContextPayload, options: ReplOptions | None = None) -> None: ...

    async def execute(
        self, code: str, rpc: RpcHandler, history_append: list[dict[str, Any]] | None = None
    ) -> ExecResult: ...

    async def get_var(self, name: str) -> dict[str, Any]: ...

    # a session's value under a reserved name (context_N, history_N, history), kept across restarts
    async def put(self, name: str, payload: ContextPayload) -> None: ...

    async def close(self) -> None: ...


class SandboxFactory(Protocol):
    """The sandboxes of one run: called once per RLM node; `aclose` ends what they share (a zygote)."""

    def __call__(self) -> Sandbox: ...

    async def aclose(self) -> None: ...
