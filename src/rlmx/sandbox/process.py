"""The host side of a REPL worker: get it from the run's zygote, feed it cells, answer its RPCs,
restart it when it dies or runs too long. Everything the worker sends is checked against the protocol."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any

from rlmx.context.payload import ContextPayload
from rlmx.errors import BudgetExhausted, ProtocolViolation, RLMError, SandboxError
from rlmx.sandbox import wire
from rlmx.sandbox.base import ExecResult, RpcHandler, SandboxSettings
from rlmx.sandbox.pool import WorkerHandle, WorkerPool, worker_env

__all__ = ["RESTART_NOTE", "ProcessSandbox", "ProcessSandboxes", "worker_env"]

RESTART_NOTE = "the REPL was restarted; variables were lost; `context` is loaded again"
_EOF = object()
BLOB_CHUNK = 1 << 20
MAX_ACTIVE_RPCS = 64  # a worker's own code sends one request at a time; many at once is forged


class ProcessSandboxes:
    """The sandboxes of one run: one zygote, started with the root's context; every REPL is forked from it."""

    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        self.pool = WorkerPool(settings, isolated=settings.backend != "process-unisolated")

    def __call__(self) -> ProcessSandbox:
        return ProcessSandbox(self.settings, pool=self.pool)

    async def aclose(self) -> None:
        await self.pool.close()


class ProcessSandbox:
    """A REPL in a worker process, spoken to over two pipes. Without a `pool` it has a zygote of its own."""

    def __init__(self, settings: SandboxSettings | None = None, *, pool: WorkerPool | None = None):
        self.settings = settings or SandboxSettings()
        self.own_pool = pool is None
        self.pool = pool or WorkerPool(self.settings, isolated=self.settings.backend != "process-unisolated")
        self.payload = ContextPayload("none")
        self.history: list[dict[str, Any]] = []
        self.handle: WorkerHandle | None = None
        self.frames: asyncio.Queue[Any] = asyncio.Queue()
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

    # --- life cycle ---------------------------------------------------------------------------------
    async def start(self, payload: ContextPayload) -> None:
        self.payload = payload
        await self._spawn()

    async def _spawn(self) -> None:
        self.handle, self.inherited = await self.pool.spawn(self.payload)
        self.generation += 1
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=2**20)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader),
            os.fdopen(self.handle.from_worker, "rb", buffering=0),
        )
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(self.handle.to_worker, "wb", buffering=0)
        )
        self.writer = asyncio.StreamWriter(transport, protocol, None, loop)
        self.frames = asyncio.Queue()
        self.reader_task = asyncio.create_task(self._read_frames(reader))
        init = {
            "type": wire.INIT,
            "context_kind": wire.INHERITED if self.inherited else self.payload.kind,
            "context_options": self.payload.options,
            "history": self.history,
            "output_chars": self.settings.output_chars,
            "cell_cpu_s": self.settings.cell_cpu_s,
        }
        try:
            await self._send(init, None if self.inherited else self.payload)
            ready = await asyncio.wait_for(self.frames.get(), self.settings.start_timeout_s)
        except (asyncio.TimeoutError, ConnectionError, BrokenPipeError) as exc:
            ready = exc
        if not (isinstance(ready, dict) and ready.get("type") == wire.READY):
            detail = self.pool.stderr_tail()
            await self._kill()
            raise SandboxError(f"REPL worker failed to start: {detail or ready!r}")
        self.pid = int(ready.get("pid", 0)) or None
        self.context_stats = ready.get("context_stats")  # what the worker loaded (rlmx.context.metadata)
        try:
            for name, payload in self.extras.items():
                await self._put(name, payload)
        except (EOFError, ConnectionError, BrokenPipeError, asyncio.TimeoutError, SandboxError) as exc:
            await self._kill()
            raise SandboxError(f"REPL worker failed to take the session's values: {exc}") from exc

    async def put(self, name: str, payload: ContextPayload) -> None:
        """Put a session's value into the REPL under a reserved name (see wire.PUT); it is put into
        every worker started after this one too. `history` (an empty list: a new question) is carried
        by INIT instead. A worker found dead is restarted (`restarts` counts it)."""
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
        await self._send(
            {"type": wire.PUT, "id": self.next_id, "name": name, "context_kind": payload.kind}, payload
        )
        item = await asyncio.wait_for(self.frames.get(), self.settings.start_timeout_s)
        if item is _EOF:
            raise EOFError("the REPL worker is gone")
        if (
            not isinstance(item, dict)
            or item.get("type") != wire.PUT_RESULT
            or item.get("id") != self.next_id
        ):
            raise ProtocolViolation(f"REPL worker answered put with {str(item)[:200]}")
        if not item.get("ok"):
            raise SandboxError(f"the REPL could not take {name}: {item.get('error')}")

    async def _read_frames(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                header = await reader.readexactly(wire.HEADER.size)
                json_len, blob_len = wire.decode_header(header)
                message = wire.decode_body(await reader.readexactly(json_len))
                if blob_len:
                    raise ValueError("a worker may not send binary blobs")
                if message["type"] not in wire.WORKER_TO_HOST:
                    raise ValueError(f"a worker may not send {message['type']!r}")
                await self.frames.put(message)
        except asyncio.IncompleteReadError:
            await self.frames.put(_EOF)
        except (ValueError, UnicodeDecodeError) as exc:
            await self.frames.put(ProtocolViolation(f"REPL worker protocol violation: {exc}"))

    async def _send(self, message: dict[str, Any], payload: ContextPayload | None = None) -> None:
        assert self.writer is not None
        size = payload.size() if payload is not None else 0
        self.writer.write(wire.encode(message) if not size else wire.encode_header(message, size))
        if payload is not None and size:
            for piece in payload.pieces(BLOB_CHUNK):  # no copy of a large context, whole, in any buffer
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
                await self._send({"type": wire.SHUTDOWN})
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
        exec_id = self.next_id
        self.history.extend(history_append or [])
        started = time.monotonic()
        request = {"type": wire.EXEC, "id": exec_id, "code": code, "history_append": history_append or []}
        try:
            await self._send(request)
        except (ConnectionError, BrokenPipeError):  # it died just now, before the reader saw it go
            note = await self._died_between_cells(gone=True)
            await self._send(request)
        budget, used, rpc_calls = self.settings.cell_timeout_s, 0.0, 0
        active: dict[int, asyncio.Task[None]] = {}
        # Time spent in sub-calls is not the cell's own -- until a request is refused: from then on all
        # time counts, so a loop of refused requests cannot hold the cell open for ever.
        charged = False
        try:
            while True:
                t0 = time.monotonic()
                paused = bool(active) and not charged
                timeout = None if paused else max(0.0, budget - used)
                try:
                    item = await asyncio.wait_for(self.frames.get(), timeout)
                except asyncio.TimeoutError:
                    _cancel(active)
                    await self.restart()
                    return ExecResult(
                        output="",
                        error=f"TimeoutError: the cell ran longer than {budget:g} s and was stopped; {RESTART_NOTE}",
                        restarted=True,
                        timed_out=True,
                        duration_s=time.monotonic() - started,
                        rpc_calls=rpc_calls,
                    )
                if not paused:
                    used += time.monotonic() - t0
                if item is _EOF:
                    _cancel(active)
                    await self.restart()
                    return ExecResult(
                        output="",
                        error=f"the REPL process died while running this cell; {RESTART_NOTE}",
                        restarted=True,
                        duration_s=time.monotonic() - started,
                        rpc_calls=rpc_calls,
                    )
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, tuple):  # ("rpc_done", id, refused)
                    active.pop(item[1], None)
                    charged = charged or item[2]
                    continue
                kind = item["type"]
                if kind == wire.RPC:
                    rid = item.get("id")
                    if (
                        not isinstance(rid, int)
                        or rid in active
                        or item.get("method") not in wire.RPC_METHODS
                        or len(active) >= MAX_ACTIVE_RPCS
                    ):
                        raise ProtocolViolation(f"REPL worker sent a bad request: {str(item)[:200]}")
                    rpc_calls += 1
                    active[rid] = asyncio.create_task(self._answer(rid, item, rpc, self.generation))
                elif kind == wire.EXEC_RESULT and item.get("id") == exec_id:
                    result = ExecResult(
                        output=str(item.get("output", "")),
                        error=item.get("error"),
                        final=item.get("final"),
                        duration_s=time.monotonic() - started,
                        rpc_calls=rpc_calls,
                        variables=list(item.get("variables") or []),
                    )
                    if note:
                        result.output, result.restarted = f"{note}\n{result.output}", True
                    if item.get("restart"):  # the worker asks for it (threads it cannot stop)
                        _cancel(active)
                        await self.restart()
                        result.error = f"{result.error or ''}; {RESTART_NOTE}".lstrip("; ")
                        result.restarted = True
                    return result
                else:
                    raise ProtocolViolation(f"REPL worker sent an unexpected {kind!r} (id {item.get('id')})")
        finally:
            _cancel(active)

    async def _died_between_cells(self, *, gone: bool = False) -> str:
        """A worker that died while idle (e.g. threads it left running used up its CPU allowance) is
        restarted before the next cell, which then runs in the new REPL; the model is told."""
        if not gone:
            if self.frames.empty():
                return ""
            item = self.frames.get_nowait()
            if isinstance(item, BaseException):
                raise item
            if item is not _EOF:
                raise ProtocolViolation(f"REPL worker sent {str(item)[:200]} between cells")
        await self.restart()
        return f"[the REPL process ended after the previous cell (code it left running); {RESTART_NOTE}]"

    async def _answer(self, rid: int, request: dict[str, Any], rpc: RpcHandler, generation: int) -> None:
        params = request.get("params")
        try:
            if not isinstance(params, dict):
                raise ProtocolViolation("rpc params must be an object")
            result = await rpc(str(request["method"]), params)
            reply: dict[str, Any] = {"ok": True, "result": result}
        except BudgetExhausted as exc:
            reply = {"ok": False, "kind": "budget", "error": str(exc)}
        except RLMError as exc:
            reply = {"ok": False, "kind": "error", "error": str(exc)}
        except Exception as exc:  # a bug in the host's handler: loud, never a silent hang
            await self.frames.put(exc)
            return
        if generation != self.generation:
            return  # the worker that asked was replaced meanwhile: the new one must not get this
        # done before the reply is written: a worker that never reads its replies must not stop the
        # cell's clock (the timeout then restarts it)
        await self.frames.put(("rpc_done", rid, not reply["ok"]))
        try:
            await self._send({"type": wire.RPC_RESULT, "id": rid, **reply})
        except (ConnectionError, BrokenPipeError):
            pass  # the worker is gone; execute() sees the EOF and restarts it

    async def get_var(self, name: str) -> dict[str, Any]:
        if self.handle is None:
            raise SandboxError("the sandbox is not running")
        self.next_id += 1
        await self._send({"type": wire.GET_VAR, "id": self.next_id, "name": name})
        item = await asyncio.wait_for(self.frames.get(), self.settings.cell_timeout_s)
        if (
            not isinstance(item, dict)
            or item.get("type") != wire.VAR_RESULT
            or item.get("id") != self.next_id
        ):
            raise ProtocolViolation(f"REPL worker answered get_var with {str(item)[:200]}")
        return item


def _cancel(tasks: dict[int, asyncio.Task[None]]) -> None:
    for task in tasks.values():
        task.cancel()
    tasks.clear()
