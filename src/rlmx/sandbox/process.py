"""The host side of a REPL worker: get it from the run's zygote, feed it cells, answer its RPCs,
restart it when it dies or runs too long. Everything the worker sends is checked against the protocol
(`rlmx.sandbox.frames`: the frame types a worker may send, their fields; here: the ids they answer)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any, cast

from rlmx.context.payload import ContextPayload
from rlmx.errors import BudgetExhausted, ProtocolViolation, RLMError, SandboxError, SandboxRefused
from rlmx.repl import image_refs
from rlmx.sandbox import frames, wire
from rlmx.sandbox.base import ExecResult, RpcHandler, SandboxSettings
from rlmx.sandbox.inbox import Broken, CellClock, Inbound, RpcDone, WorkerGone
from rlmx.sandbox.pool import WorkerHandle, WorkerPool, worker_env

__all__ = ["RESTART_NOTE", "ProcessSandbox", "ProcessSandboxes", "worker_env"]

RESTART_NOTE = "the REPL was restarted; variables were lost; `context` is loaded again"
BLOB_CHUNK = 1 << 20
MAX_ACTIVE_RPCS = 64  # a worker's own code sends one request at a time; many at once is forged
MAX_RPC_IMAGE_BYTES = 256 * 1024 * 1024  # the images one request of a cell may carry, all together


class ProcessSandboxes:
    """The sandboxes of one run: one zygote, started with the root's context; every REPL is forked from it."""

    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        self.pool = WorkerPool(settings)

    def __call__(self) -> ProcessSandbox:
        return ProcessSandbox(self.settings, pool=self.pool)

    async def aclose(self) -> None:
        await self.pool.close()


class ProcessSandbox:
    """A REPL in a worker process, spoken to over two pipes. Without a `pool` it has a zygote of its own."""

    def __init__(self, settings: SandboxSettings | None = None, *, pool: WorkerPool | None = None):
        self.settings = settings or SandboxSettings()
        self.own_pool = pool is None
        self.pool = pool or WorkerPool(self.settings)
        self.payload = ContextPayload("none")
        self.options = frames.ReplOptions()
        self.history: list[dict[str, Any]] = []
        self.handle: WorkerHandle | None = None
        self.inbox: asyncio.Queue[Inbound] = asyncio.Queue()
        self.reader_task: asyncio.Task[None] | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.next_id = 0
        self.pid: int | None = None
        self.restarts = 0
        self.inherited = False  # the worker shares the zygote's copy of the context
        self.generation = 0  # which worker this is: a reply meant for a replaced one is dropped
        self.context_stats: dict[str, Any] | None = None
        # a session's values put into the REPL (context_N, history_N), put again into every new worker
        self.extras: dict[str, ContextPayload] = {}

    def isolation(self) -> dict[str, Any]:
        """Where this REPL's code runs (the zygote's report), in `SandboxReady`'s fields."""
        report = self.pool.isolation
        if report is None:
            return {"layer": "", "worker_ids": "none"}
        return {
            "layer": report.layer,
            "worker_ids": report.worker_ids,
            "landlock_abi": report.landlock_abi,
            "seccomp": report.seccomp,
            "unavailable": dict(report.unavailable),
            "notes": list(report.notes),
        }

    # --- life cycle ---------------------------------------------------------------------------------
    async def start(self, payload: ContextPayload, options: frames.ReplOptions | None = None) -> None:
        self.payload = payload
        self.options = options or frames.ReplOptions()
        await self._spawn()

    async def _spawn(self) -> None:
        self.handle, self.inherited = await self.pool.spawn(self.payload)
        self.generation += 1
        await self._connect(self.handle)
        settings = frames.WorkerSettings(self.options, self.settings.output_chars, self.settings.cell_cpu_s)
        kind = frames.INHERITED if self.inherited else self.payload.kind
        init = frames.Init(kind, self.payload.options, settings, self.history)
        try:
            await self._send(init, None if self.inherited else ("context", self.payload))
            ready: Any = await asyncio.wait_for(self.inbox.get(), self.settings.start_timeout_s)
        except (asyncio.TimeoutError, ConnectionError, BrokenPipeError) as exc:
            ready = exc
        if not isinstance(ready, frames.Ready):
            detail = self.pool.stderr_tail()
            await self._kill()
            raise SandboxError(f"REPL worker failed to start: {detail or ready!r}")
        self.pid = ready.pid or None
        self.context_stats = ready.context_stats  # what the worker loaded (rlmx.context.metadata)
        try:
            for name, payload in self.extras.items():
                await self._put(name, payload)
        except (EOFError, ConnectionError, BrokenPipeError, asyncio.TimeoutError, SandboxError) as exc:
            await self._kill()
            raise SandboxError(f"REPL worker failed to take the session's values: {exc}") from exc

    async def _connect(self, handle: WorkerHandle) -> None:
        """Streams on the worker's two pipes, and a fresh inbox its frames are read into."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=2**20)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader),
            os.fdopen(handle.from_worker, "rb", buffering=0),
        )
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(handle.to_worker, "wb", buffering=0)
        )
        self.writer = asyncio.StreamWriter(transport, protocol, None, loop)
        self.inbox = asyncio.Queue()
        self.reader_task = asyncio.create_task(self._read_frames(reader))

    async def put(self, name: str, payload: ContextPayload) -> None:
        """Put a session's value into the REPL under a reserved name (see frames.Put); it is put into
        every worker started after this one too. `history` (an empty list: a new question) is carried
        by INIT instead. A worker found dead is restarted (`restarts` counts it)."""
        if payload.kind not in frames.PUT_KINDS:
            raise SandboxError(f"a value put into a live REPL cannot be of kind {payload.kind!r}")
        if name == "history":
            self.history = []
        else:
            self.extras[name] = payload
        if self.handle is None:
            return  # not started: the start puts it
        await self._died_between_cells()  # a restart puts everything again
        try:
            await self._put(name, payload)
        except (EOFError, ConnectionError, BrokenPipeError):
            await self.restart()

    async def _put(self, name: str, payload: ContextPayload) -> None:
        self.next_id += 1
        kind = cast(frames.PutKind, payload.kind)
        await self._request(frames.Put(self.next_id, name, kind), ("value", payload), f"take {name}")

    async def define(self, tools: list[dict[str, Any]], outputs: list[dict[str, Any]] | None) -> None:
        """A bare REPL's host functions and SUBMIT fields (frames.Define); refused: SandboxError."""
        self.next_id += 1
        await self._request(frames.Define(self.next_id, tools, outputs), None, "define its functions")

    async def assign(self, name: str, payload: ContextPayload | None) -> None:
        """Bind a value in a bare REPL (frames.Assign); None: the value last sent under `name`."""
        self.next_id += 1
        kind = cast(frames.PutKind, payload.kind if payload is not None else "none")
        frame = frames.Assign(self.next_id, name, kind, payload is None)
        await self._request(frame, None if payload is None else ("value", payload), f"take {name}")

    async def _request(
        self, frame: frames.Frame, attachment: tuple[str, ContextPayload] | None, what: str
    ) -> None:
        """Send a frame the worker answers with PUT_RESULT, and wait for that answer."""
        if self.handle is None:
            raise SandboxError("the sandbox is not running")
        await self._send(frame, attachment)
        item = await asyncio.wait_for(self.inbox.get(), self.settings.start_timeout_s)
        if isinstance(item, WorkerGone):
            raise EOFError("the REPL worker is gone")
        if isinstance(item, Broken):
            raise item.error
        if not isinstance(item, frames.PutResult) or item.id != getattr(frame, "id", None):
            raise ProtocolViolation(f"REPL worker answered {frame.TYPE} with {_what(item)}")
        if item.error is not None:
            raise SandboxRefused(f"the REPL could not {what}: {item.error}")

    async def _read_frames(self, reader: asyncio.StreamReader) -> None:
        """The worker's frames, checked, into the inbox; then WorkerGone or Broken, and nothing more."""
        try:
            while True:
                header = await reader.readexactly(wire.HEADER.size)
                json_len, blob_len = wire.decode_header(header)
                message = wire.decode_body(await reader.readexactly(json_len))
                if blob_len > MAX_RPC_IMAGE_BYTES:
                    raise ValueError(
                        f"a worker's images may not exceed {MAX_RPC_IMAGE_BYTES:,} bytes a request"
                    )
                blob = await reader.readexactly(blob_len) if blob_len else b""
                frame, attachments = frames.decode(message, blob, frames.WORKER_TO_HOST)
                if isinstance(frame, frames.Rpc) and (attachments or "images" in frame.params):
                    frame = frames.Rpc(frame.id, frame.method, image_refs.attach(frame.params, attachments))
                await self.inbox.put(frame)
        except asyncio.IncompleteReadError:
            await self.inbox.put(WorkerGone())
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # JSON nested too deep: refused
            await self.inbox.put(Broken(ProtocolViolation(f"REPL worker protocol violation: {exc}")))

    async def _send(self, frame: frames.Frame, attachment: tuple[str, ContextPayload] | None = None) -> None:
        """A frame, with a payload attached under a name; a large context goes in pieces, never copied
        whole into any buffer."""
        assert self.writer is not None
        size = attachment[1].size() if attachment is not None else 0
        if not size:
            self.writer.write(frames.encode(frame))
        else:
            assert attachment is not None
            self.writer.write(frames.encode_header(frame, [(attachment[0], size)]))
            for piece in attachment[1].pieces(BLOB_CHUNK):
                self.writer.write(piece)
                await self.writer.drain()
        await self.writer.drain()

    async def _kill(self) -> None:
        if self.reader_task:
            self.reader_task.cancel()
        if self.writer:
            self.writer.close()
        if self.handle is not None:
            self.handle.kill()
            await self.handle.wait_exit()
            self.handle.release()
        self.handle, self.writer, self.reader_task = None, None, None

    async def restart(self) -> None:
        await self._kill()
        self.restarts += 1
        await self._spawn()

    async def close(self) -> None:
        if self.handle is not None and self.writer is not None:
            with contextlib.suppress(ConnectionError, BrokenPipeError):
                await self._send(frames.Shutdown())
        await self._kill()
        if self.own_pool:
            await self.pool.close()

    # --- cells --------------------------------------------------------------------------------------
    async def execute(
        self, code: str, rpc: RpcHandler, history_append: list[dict[str, Any]] | None = None
    ) -> ExecResult:
        if self.handle is None:
            raise SandboxError("the sandbox is not running")
        note = await self._died_between_cells()
        self.next_id += 1
        request = frames.Exec(self.next_id, code, history_append or [])
        self.history.extend(request.history_append)
        cell = CellClock(request.id, self.settings.cell_timeout_s)
        note = await self._send_exec(request) or note
        try:
            return await self._run(cell, rpc, note)
        finally:
            cell.cancel()

    async def _send_exec(self, request: frames.Exec) -> str:
        """Send the cell; a worker that died just now (before the reader saw it go) is restarted and
        the cell sent to the new one. Returns the note saying so, or ""."""
        try:
            await self._send(request)
        except (ConnectionError, BrokenPipeError):
            note = await self._died_between_cells(gone=True)
            await self._send(request)
            return note
        return ""

    async def _run(self, cell: CellClock, rpc: RpcHandler, note: str) -> ExecResult:
        """Answer the cell's requests until its result comes, its time is up, or its worker dies."""
        while True:
            item = await self._next(cell)
            if item is None:
                why = f"TimeoutError: the cell ran longer than {cell.budget:g} s and was stopped"
                return await self._stopped(cell, why, timed_out=True)
            if isinstance(item, WorkerGone):
                return await self._stopped(cell, "the REPL process died while running this cell")
            if isinstance(item, Broken):
                raise item.error
            if isinstance(item, RpcDone):
                cell.active.pop(item.id, None)
                cell.charged = cell.charged or item.refused
            elif isinstance(item, frames.Rpc):
                self._start_rpc(cell, item, rpc)
            elif isinstance(item, frames.ExecResult) and item.id == cell.exec_id:
                return await self._finished(cell, item, note)
            else:
                raise ProtocolViolation(f"REPL worker sent an unexpected {_what(item)}")

    async def _next(self, cell: CellClock) -> Inbound | None:
        """The next thing in the inbox, or None when the cell's time ran out first."""
        t0, paused = time.monotonic(), cell.paused
        try:
            item = await asyncio.wait_for(self.inbox.get(), cell.timeout())
        except asyncio.TimeoutError:
            return None
        if not paused:
            cell.used += time.monotonic() - t0
        return item

    def _start_rpc(self, cell: CellClock, request: frames.Rpc, rpc: RpcHandler) -> None:
        if request.id in cell.active or len(cell.active) >= MAX_ACTIVE_RPCS:
            raise ProtocolViolation(f"REPL worker sent a bad request: {request.method} {request.id}")
        cell.rpc_calls += 1
        cell.active[request.id] = asyncio.create_task(self._answer(request, rpc, self.generation))

    async def _stopped(self, cell: CellClock, why: str, *, timed_out: bool = False) -> ExecResult:
        """The cell's worker was lost (its time was up, or it died): a new one is started."""
        cell.cancel()
        await self.restart()
        return ExecResult(
            output="",
            error=f"{why}; {RESTART_NOTE}",
            restarted=True,
            timed_out=timed_out,
            duration_s=cell.elapsed(),
            rpc_calls=cell.rpc_calls,
        )

    async def _finished(self, cell: CellClock, reply: frames.ExecResult, note: str) -> ExecResult:
        result = ExecResult(
            output=reply.output,
            error=reply.error,
            final=reply.final,
            duration_s=cell.elapsed(),
            rpc_calls=cell.rpc_calls,
            variables=list(reply.variables),
        )
        if note:
            result.output, result.restarted = f"{note}\n{result.output}", True
        if reply.restart:  # the worker asks for it (threads it cannot stop)
            cell.cancel()
            await self.restart()
            result.error = f"{result.error or ''}; {RESTART_NOTE}".lstrip("; ")
            result.restarted = True
        return result

    async def _died_between_cells(self, *, gone: bool = False) -> str:
        """A worker that died while idle (e.g. threads it left running used up its CPU allowance) is
        restarted before the next cell, which then runs in the new REPL; the model is told."""
        if not gone:
            if self.inbox.empty():
                return ""
            item = self.inbox.get_nowait()
            if isinstance(item, Broken):
                raise item.error
            if not isinstance(item, WorkerGone):
                raise ProtocolViolation(f"REPL worker sent {_what(item)} between cells")
        await self.restart()
        return f"[the REPL process ended after the previous cell (code it left running); {RESTART_NOTE}]"

    async def _answer(self, request: frames.Rpc, rpc: RpcHandler, generation: int) -> None:
        try:
            reply = frames.RpcResult(request.id, await rpc(request.method, request.params))
        except BudgetExhausted as exc:
            reply = frames.RpcResult(request.id, failure=frames.RpcFailure("budget", str(exc)))
        except RLMError as exc:
            reply = frames.RpcResult(request.id, failure=frames.RpcFailure("error", str(exc)))
        except Exception as exc:  # a bug in the host's handler: loud, never a silent hang
            await self.inbox.put(Broken(exc))
            return
        if generation != self.generation:
            return  # the worker that asked was replaced meanwhile: the new one must not get this
        # done before the reply is written: a worker that never reads its replies must not stop the
        # cell's clock (the timeout then restarts it)
        await self.inbox.put(RpcDone(request.id, reply.failure is not None))
        try:
            await self._send(reply)
        except (ConnectionError, BrokenPipeError):
            pass  # the worker is gone; execute() sees the EOF and restarts it

    async def get_var(self, name: str) -> dict[str, Any]:
        """The variable's value as the worker encodes it: {"ok": True, "text" | "json": ...}, or
        {"ok": False, "error": ...}."""
        if self.handle is None:
            raise SandboxError("the sandbox is not running")
        self.next_id += 1
        await self._send(frames.GetVar(self.next_id, name))
        item = await asyncio.wait_for(self.inbox.get(), self.settings.cell_timeout_s)
        if not isinstance(item, frames.VarResult) or item.id != self.next_id:
            raise ProtocolViolation(f"REPL worker answered get_var with {_what(item)}")
        return var_reply(item)


def var_reply(item: frames.VarResult) -> dict[str, Any]:
    if item.value is None:
        return {"ok": False, "error": item.error}
    return {"ok": True, **item.value}


def _what(item: Inbound) -> str:
    """A short description of what came, for a protocol violation's message."""
    if isinstance(item, frames.Frame):
        return f"{item.TYPE!r} (id {getattr(item, 'id', None)})"
    return type(item).__name__
