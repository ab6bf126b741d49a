"""The REPL worker: runs model-written code next to the context, in its own process.

Forked by the run's zygote (`rlmx.sandbox.zygote`, which calls `serve_forked`); the `local` backend
runs one inside the host (`rlmx.sandbox.in_process`). It talks to the host only through the typed frames
of `rlmx.sandbox.frames` on its two pipes. It never holds API keys and never calls a model itself:
every `llm_query` is a request to the host, which decides (ledger, limits) whether to make the call.
What the model's code can use is put together by `rlmx.repl.namespace`.
"""

from __future__ import annotations

import ast
import math
import os
import resource
import signal
import sys
import threading
from typing import Any

from rlmx.repl import image_refs, syntax
from rlmx.repl.namespace import ReplNamespace, check_model_name, encode_value, restored_note, text_view
from rlmx.repl.textview import TextView
from rlmx.sandbox import frames
from rlmx.sandbox.capture import CappedWriter, short_traceback

MAX_PROMPT_CHARS = 16_000_000

# The context the zygote loaded before it forked this worker, with its text view; used for the
# "inherited" context kind, so a forked worker shares it copy-on-write instead of receiving a copy.
INHERITED: tuple[Any, TextView] | None = None
# What load_context measured (shape, size, files left out, pre-filter); a worker reports it in READY.
CONTEXT_STATS: dict[str, Any] | None = None


def load_context(kind: str | None, blob: bytes, options: dict[str, Any] | None = None) -> Any:
    """Decode a context payload into the REPL's `context`. The zygote calls this once per run, before it
    isolates itself (so a payload may name host files it reads); a worker calls it for a child's value.
    A "files" payload is read here (see rlmx.context.payload); an unknown kind raises ValueError."""
    global CONTEXT_STATS
    loaded = _load_payload(kind, blob, options)
    CONTEXT_STATS = loaded.stats
    return loaded.value


def _load_payload(kind: str | None, blob: bytes, options: dict[str, Any] | None) -> Any:
    from rlmx.context.payload import ContextPayload, load_payload

    return load_payload(ContextPayload(kind or "none", blob, dict(options or {})))


def inherit_context(context: Any) -> None:
    """Called by the zygote: the context (and its view) every worker forked with `inherit` starts with."""
    global INHERITED
    INHERITED = (context, text_view(context))  # the view's line index is built once, before the fork


class BudgetExhaustedError(RuntimeError):
    """Raised inside the REPL when a limit forbids another model call."""


class SubcallError(RuntimeError):
    """Raised inside the REPL when a sub-call failed for good."""


class CPUTimeExceeded(BaseException):
    """Raised inside the REPL when a cell has used up its CPU time (RLIMIT_CPU's soft limit)."""


class Worker:
    def __init__(self, in_fd: int, out_fd: int) -> None:
        self.in_fd = in_fd
        self.out_fd = out_fd
        self.lock = threading.Lock()
        self.next_rpc = 0
        self.in_cell = False
        self.output_chars = 20_000
        self.repl = ReplNamespace()  # what the model's code runs in
        self.fd_capture = -1
        self.cell_cpu_s = 0  # 0: no per-cell CPU limit (the local backend)
        self.is_fork = False  # this process is a fork made by the model's code, not the worker
        self.context_stats: dict[str, Any] | None = None  # the context's shape and size, for READY
        self.cell_out: CappedWriter | None = None  # the running cell's output (the worker's notes go there)
        self.bare: Any = None  # a bare REPL (rlmx.sandbox.bare.BareRepl) instead of `repl`, if INIT asks

    # --- RPC to the host -----------------------------------------------------------------------
    def forked(self) -> None:
        """In a process the model's code forked (os.fork, multiprocessing): it must never speak for the
        worker, so it loses the pipes; when its copy of the cell ends, it exits."""
        for fd in (self.in_fd, self.out_fd):
            if fd >= 0:
                os.close(fd)
        self.in_fd = self.out_fd = -1
        self.is_fork = True

    def rpc(self, method: frames.Method, params: dict[str, Any]) -> Any:
        """Ask the host and wait: its result as it sent it, or its refusal raised in the cell."""
        if self.is_fork:
            raise RuntimeError(f"{method} cannot be called from a process forked in the REPL")
        if not self.in_cell:
            raise RuntimeError(f"{method} can only be called while a cell is running")
        with self.lock:
            self.next_rpc += 1
            rid = self.next_rpc
            params, attachments = image_refs.detach(params)
            frames.write(self.out_fd, frames.Rpc(rid, method, params), attachments)
            try:
                reply, _ = frames.read(self.in_fd, frames.HOST_TO_WORKER)
            except frames.ProtocolError as exc:
                raise SystemExit(f"protocol violation: {exc}") from None
        if not isinstance(reply, frames.RpcResult) or reply.id != rid:
            raise SystemExit(f"protocol violation: expected rpc_result {rid}, got {reply.TYPE}")
        if reply.failure is None:
            return reply.result
        if reply.failure.kind == "budget":
            raise BudgetExhaustedError(reply.failure.message)
        raise SubcallError(reply.failure.message)

    @staticmethod
    def _prompt(prompt: Any) -> str:
        text = prompt if isinstance(prompt, str) else str(prompt)
        if len(text) > MAX_PROMPT_CHARS:
            raise ValueError(
                f"prompt of {len(text)} characters is too large to send (limit {MAX_PROMPT_CHARS}); "
                "split it into chunks"
            )
        return text

    def note(self, text: str) -> None:
        """One line of rlmx's own in the running cell's output."""
        out = self.cell_out
        if out is not None:
            out.write("[rlmx] " + " ".join(text.splitlines()) + "\n")

    def llm_query(self, prompt: Any, model: str | None = None, images: Any = None, detail: Any = None) -> str:
        params: dict[str, Any] = {"prompt": self._prompt(prompt), "model": model}
        if images is not None:
            params.update(images=image_refs.wire_images(images), detail=image_refs.check_detail(detail))
        return str(self.rpc("llm_query", params))

    def vision_query(
        self, prompt: Any, images: Any = None, model: str | None = None, detail: Any = None
    ) -> str:
        """`llm_query` with images (the name the official example's vision helper has)."""
        return self.llm_query(prompt, model, images=images if images is not None else [], detail=detail)

    def llm_query_batched(
        self, prompts: Any, model: str | None = None, images: Any = None, detail: Any = None
    ) -> list[str]:
        items = [self._prompt(p) for p in list(prompts)]
        if sum(len(p) for p in items) > MAX_PROMPT_CHARS * 2:
            raise ValueError("batch too large to send at once; split it into several batches")
        params: dict[str, Any] = {"prompts": items, "model": model}
        if images is not None:
            lists = list(images)
            if len(lists) != len(items):
                raise ValueError(f"llm_query_batched: {len(items)} prompts but {len(lists)} image lists")
            params.update(
                images=[image_refs.wire_images(one) for one in lists], detail=image_refs.check_detail(detail)
            )
        return [str(r) for r in self.rpc("llm_query_batched", params)]

    def rlm_query(self, prompt: Any, model: str | None = None, context: Any = None) -> str:
        model = check_model_name("rlm_query", model)
        params = {"prompt": self._prompt(prompt), "model": model, "context": context}
        return str(self.rpc("rlm_query", params))

    def rlm_query_batched(self, prompts: Any, model: str | None = None, contexts: Any = None) -> list[str]:
        model = check_model_name("rlm_query_batched", model)
        items = [self._prompt(p) for p in list(prompts)]
        ctxs = list(contexts) if contexts is not None else None
        if ctxs is not None and len(ctxs) != len(items):
            raise ValueError(f"rlm_query_batched: {len(items)} prompts but {len(ctxs)} contexts")
        params = {"prompts": items, "model": model, "contexts": ctxs}
        return [str(r) for r in self.rpc("rlm_query_batched", params)]

    # --- set-up and cells ----------------------------------------------------------------------
    def init(self, frame: frames.Init, blob: bytes) -> None:
        if frame.context_kind == frames.INHERITED:
            if INHERITED is None:
                raise SystemExit("protocol violation: this worker holds no inherited context")
            context, view = INHERITED
            self.context_stats = CONTEXT_STATS
        else:
            loaded = _load_payload(frame.context_kind, blob, frame.context_options)
            context, self.context_stats = loaded.value, loaded.stats
            view = text_view(context)
        settings = frame.settings
        self.output_chars = settings.output_chars
        self.cell_cpu_s = settings.cell_cpu_s
        if settings.repl.bare:
            from rlmx.sandbox.bare import BareRepl

            self.bare = BareRepl(lambda params: self.rpc("tool", params))
            return
        self.repl.fill(
            context,
            view,
            history=list(frame.history),
            host=self,
            cache_dir=frame.context_options.get("cache_dir"),
            dialect=settings.repl.dialect,
            tools=self.tools(settings.repl),
            session=settings.repl.session,
            note=self.note,
        )

    def put(self, frame: frames.Put, blob: bytes) -> str | None:
        """A session's value put into this live REPL (frames.Put): None, or why it could not be."""
        try:
            self.repl.put(frame.name, _load_payload(frame.context_kind, blob, {}).value)
        except (ValueError, TypeError) as exc:
            return str(exc)
        return None

    def tools(self, options: frames.ReplOptions) -> dict[str, Any]:
        """The user's tools (see rlmx.repl.tools); a REPL without any never imports that module."""
        if not options.tools and not options.tool_values:
            return {}
        from rlmx.repl.tools import repl_tools

        return repl_tools(options.tools, options.tool_values, options.tool_max_bytes, self.tool_call)

    def tool_call(self, params: dict[str, Any]) -> Any:
        """A stub's call, already checked in the REPL: its failure is the cell's ToolError."""
        try:
            return self.rpc("tool", params)
        except SubcallError as exc:
            from rlmx.repl.tools import ToolError

            raise ToolError(str(exc)) from None

    # --- output capture and the per-cell CPU limit (the local backend overrides these) ---------------
    def redirect(self, out: CappedWriter) -> Any:
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = out  # type: ignore[assignment]
        return saved

    def restore(self, saved: Any) -> None:
        sys.stdout, sys.stderr = saved

    def _on_cpu_limit(self, signum: int, frame: Any) -> None:
        if self.in_cell:
            raise CPUTimeExceeded(f"the cell used more than {self.cell_cpu_s} s of CPU time and was stopped")

    def arm_cpu_limit(self, *, in_cell: bool = True) -> None:
        """RLIMIT_CPU's soft limit moves to now + cell_cpu_s (the hard one bounds the process's life).
        In a cell, SIGXCPU raises CPUTimeExceeded in the cell's code; between cells, threads the code
        left running get this allowance again, and past it SIGXCPU ends the process (the host restarts it)."""
        if self.cell_cpu_s <= 0:
            return
        usage = resource.getrusage(resource.RUSAGE_SELF)
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = math.ceil(usage.ru_utime + usage.ru_stime) + self.cell_cpu_s
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        signal.signal(signal.SIGXCPU, self._on_cpu_limit if in_cell else signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))

    def disarm_cpu_limit(self) -> None:
        self.arm_cpu_limit(in_cell=False)

    def run_bare_cell(self, code: str, exec_id: int = 0) -> frames.ExecResult:
        """Run one cell of a bare REPL (rlmx.sandbox.bare): how it ended is its `final`."""
        out = CappedWriter(self.output_chars)
        saved = self.redirect(out)
        self.cell_out = out
        self.arm_cpu_limit()
        self.in_cell = True
        final: dict[str, Any] | None = None
        try:
            final = self.bare.run(code)
        except BaseException as exc:  # the CPU limit's signal after the cell's own handlers
            final = self.bare.raised(exc)
        finally:
            self.in_cell = False
            self.disarm_cpu_limit()
            self.restore(saved)
        out.write(self._fd_output())
        self.cell_out = None
        raised = final["json"] if final is not None and final["kind"] == "raised" else None
        error = raised["traceback"] if raised else None
        restart = None
        if raised and raised["type"] == CPUTimeExceeded.__name__ and threading.active_count() > 1:
            restart = "threads the code started were still running"
        return frames.ExecResult(exec_id, out.render(), error, final, [], restart)

    def bare_frame(self, frame: frames.Define | frames.Assign, blob: bytes) -> str | None:
        """DEFINE or ASSIGN, for a bare REPL only: None, or why it could not be done."""
        if self.bare is None:
            raise SystemExit(f"protocol violation: {frame.TYPE} is for a bare REPL")
        return self.bare.take(
            frame, lambda: _load_payload(getattr(frame, "context_kind", ""), blob, {}).value
        )

    def run_cell(self, code: str, exec_id: int = 0) -> frames.ExecResult:
        """Run one cell. Its result: the output, the error, and the answer it gave (`final`): FINAL /
        FINAL_VAR's if it called one, else the `answer` dict's when the cell left it ready -- reported
        even when the cell then raised (the host decides). Reserved names the code rebound are put
        back, and the output says so."""
        if self.bare is not None:
            return self.run_bare_cell(code, exec_id)
        out = CappedWriter(self.output_chars)
        self.repl.start_cell()
        error = None
        cpu_stopped = False
        saved = self.redirect(out)
        self.cell_out = out
        self.arm_cpu_limit()
        self.in_cell = True
        try:
            tree = syntax.parse(code, "<cell>", "exec")
            echo = self.repl.dialect.echo_last_expression
            last = tree.body[-1] if echo and tree.body and isinstance(tree.body[-1], ast.Expr) else None
            if last is not None:
                tree.body.pop()
            exec(syntax.compile_tree(tree, "<cell>", "exec"), self.repl.names)
            if last is not None:
                value = eval(
                    syntax.compile_tree(ast.Expression(last.value), "<cell>", "eval"), self.repl.names
                )
                if value is not None:
                    out.write(repr(value) + "\n")
        except SystemExit as exc:
            error = f"SystemExit: {exc.code} (exiting is not allowed; the REPL keeps running)"
        except BaseException as exc:  # the model's code errors go back to the model
            error = short_traceback(exc)
            cpu_stopped = isinstance(exc, CPUTimeExceeded)
        finally:
            self.in_cell = False
            self.disarm_cpu_limit()
            self.restore(saved)
        out.write(self._fd_output())
        final, problem = self.after_cell()
        if problem:
            error = f"{error}\n{problem}" if error else problem
        self.cell_out = None
        variables = self.repl.variable_names() if self.repl.dialect.list_variables else []
        restart = None
        if cpu_stopped and threading.active_count() > 1:  # its threads would go on burning CPU
            restart = "threads the code started were still running"
        return frames.ExecResult(exec_id, out.render(), error, final, variables, restart)

    def after_cell(self) -> tuple[dict[str, Any] | None, str | None]:
        """The cell's answer (FINAL / FINAL_VAR first, they were explicit; else a ready `answer` dict),
        then the reserved names put back. Returns (final, a problem reading the answer dict or None)."""
        problem = None
        try:
            answer = self.repl.take_answer()  # always: it also sets a ready dict back to not ready
        except Exception as exc:  # a dict subclass of the code's own, a content whose str() raises
            answer = None
            problem = f"the answer dict could not be read: {type(exc).__name__}: {exc}"
        restored = self.repl.restore_reserved()
        if restored:
            self.note(restored_note(restored))
        return (self.repl.final or answer), problem

    def _fd_output(self) -> str:
        """What the cell's code (or its subprocesses) wrote straight to file descriptors 1 and 2."""
        if self.fd_capture < 0:
            return ""
        size = os.fstat(self.fd_capture).st_size
        if not size:
            return ""
        os.lseek(self.fd_capture, max(0, size - 2 * self.output_chars), os.SEEK_SET)
        data = os.read(self.fd_capture, 2 * self.output_chars)
        os.ftruncate(self.fd_capture, 0)
        return data.decode("utf-8", "replace")

    def get_var(self, name: str, var_id: int = 0) -> frames.VarResult:
        names = self.bare.names if self.bare is not None else self.repl.names
        if name not in names:
            return frames.VarResult(var_id, None, f"no variable named {name!r} in the REPL")
        return frames.VarResult(var_id, encode_value(names[name]), None)

    def serve(self) -> None:
        try:
            self._serve()
        except frames.ProtocolError as exc:  # the host's frames are the host's: a bug, said loudly
            raise SystemExit(f"protocol violation: {exc}") from None

    def _serve(self) -> None:
        frame, attached = frames.read(self.in_fd, frames.HOST_TO_WORKER)
        if not isinstance(frame, frames.Init):
            raise SystemExit("protocol violation: first frame must be init")
        self.init(frame, attached.get("context", b""))
        del attached
        frames.write(self.out_fd, frames.Ready(os.getpid(), self.context_stats))
        while True:
            frame, attached = frames.read(self.in_fd, frames.HOST_TO_WORKER)
            if isinstance(frame, frames.Exec):
                self.repl.extend_history(frame.history_append)
                result = self.run_cell(frame.code, frame.id)
                if self.is_fork:
                    os._exit(0)
                frames.write(self.out_fd, result)
            elif isinstance(frame, frames.GetVar):
                frames.write(self.out_fd, self.get_var(frame.name, frame.id))
            elif isinstance(frame, frames.Put):
                error = self.put(frame, attached.get("value", b""))
                frames.write(self.out_fd, frames.PutResult(frame.id, error))
            elif isinstance(frame, (frames.Define, frames.Assign)):
                error = self.bare_frame(frame, attached.get("value", b""))
                frames.write(self.out_fd, frames.PutResult(frame.id, error))
            elif isinstance(frame, frames.Shutdown):
                return
            else:
                raise SystemExit(f"protocol violation: unexpected {frame.TYPE!r}")


def _capture_fds() -> int:
    """Point fds 1 and 2 at an unlinked scratch file; stdin at /dev/null."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    path = os.path.join(os.getcwd(), f".rlmx-out-{os.getpid()}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o600)
    os.unlink(path)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    return fd


def serve_forked(in_fd: int, out_fd: int) -> None:
    """Serve the host on two pipes until it closes them or says shutdown."""
    worker = Worker(in_fd, out_fd)
    worker.fd_capture = _capture_fds()
    os.register_at_fork(after_in_child=worker.forked)
    try:
        worker.serve()
    except EOFError:
        pass  # the host closed the pipe: nothing left to do
