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


BACKENDS = ("process", "process-namespaces", "process-landlock", "process-unisolated", "local")
# which isolation layer a process backend asks its zygote for (rlmx.sandbox.zygote); "auto": namespaces
# where available, else Landlock + seccomp, else refuse
LAYER_OF = {
    "process": "auto",
    "process-namespaces": "namespaces",
    "process-landlock": "landlock",
    "process-unisolated": "none",
}


@dataclass(frozen=True)
class SandboxSettings:
    """How model-written code runs, and the limits of each REPL process (see docs/security.md).

    `backend`: "process" (default: an isolated worker process -- namespaces where the host allows
    them, else Landlock + seccomp + a uid per worker; refuses to run where neither can be built),
    "process-namespaces" or "process-landlock" (that layer only), "process-unisolated" (a worker
    process without isolation: an explicit, recorded reduction), or "local" (UNSAFE: in this
    process, for trusted code and debugging only). `worker_uid_first`, `worker_uid_count`: the uids
    the Landlock layer gives its workers when started as root (one each; never 0).
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
    worker_uid_first: int = 1_900_000_000
    worker_uid_count: int = 100_000

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
        if self.worker_uid_first < 1 or self.worker_uid_count < 1:
            raise InvalidSettings(
                "SandboxSettings: worker_uid_first and worker_uid_count must be >= 1 (never uid 0)"
            )
        if self.worker_uid_first + self.worker_uid_count > 4_294_967_294:
            raise InvalidSettings(
                "SandboxSettings: worker_uid_first + worker_uid_count must stay below 4294967294"
            )

    @property
    def layer(self) -> str:
        """The isolation layer a process backend asks for ("auto", "namespaces", "landlock", "none");
        "" for the local backend."""
        return LAYER_OF.get(self.backend, "")


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
