"""The host side of a worker process: start it, feed it cells, answer its RPCs, restart it when it dies."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import rlmx
from rlmx.errors import BudgetExhausted, ProtocolViolation, RLMError, SandboxError
from rlmx.sandbox import wire
from rlmx.sandbox.base import ContextPayload, ExecResult, RpcHandler, SandboxSettings

RESTART_NOTE = "the REPL was restarted; variables were lost; `context` is loaded again"
_EOF = object()
BLOB_CHUNK = 1 << 20


def worker_env(home: str) -> dict[str, str]:
    """The worker's whole environment: what Python needs, no keys, tokens, secrets or proxies."""
    src_root = str(Path(rlmx.__file__).resolve().parent.parent)
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONPATH": src_root,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
    }


class ProcessSandbox:
    """A REPL in a separate worker process, spoken to over two pipes."""

    def __init__(self, settings: SandboxSettings | None = None, *, command_prefix: list[str] | None = None):
        self.settings = settings or SandboxSettings()
        self.command_prefix = command_prefix or []
        self.payload = ContextPayload("none")
        self.history: list[dict[str, Any]] = []
        self.proc: asyncio.subprocess.Process | None = None
        self.workdir: str | None = None
        self.frames: asyncio.Queue[Any] = asyncio.Queue()
        self.reader_task: asyncio.Task[None] | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.next_id = 0
        self.pid: int | None = None
        self.restarts = 0

    # --- life cycle ---------------------------------------------------------------------------------
    async def start(self, payload: ContextPayload) -> None:
        self.payload = payload
        await self._spawn()

    async def _spawn(self) -> None:
        self.workdir = tempfile.mkdtemp(prefix="rlmx-repl-")
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        errlog = tempfile.TemporaryFile()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.command_prefix,
                sys.executable,
                "-m",
                "rlmx.sandbox.worker",
                str(to_worker_r),
                str(from_worker_w),
                pass_fds=(to_worker_r, from_worker_w),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=errlog,
                cwd=self.workdir,
                env=worker_env(self.workdir),
                start_new_session=True,
            )
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=2**20)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(from_worker_r, "rb", buffering=0)
        )
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(to_worker_w, "wb", buffering=0)
        )
        self.writer = asyncio.StreamWriter(transport, protocol, None, loop)
        self.frames = asyncio.Queue()
        self.reader_task = asyncio.create_task(self._read_frames(reader))
        init = {
            "type": wire.INIT,
            "context_kind": self.payload.kind,
            "history": self.history,
            "output_chars": self.settings.output_chars,
        }
        try:
            await self._send(init, self.payload.blob)
            ready = await asyncio.wait_for(self.frames.get(), self.settings.start_timeout_s)
        except (asyncio.TimeoutError, ConnectionError, BrokenPipeError) as exc:
            ready = exc
        if not (isinstance(ready, dict) and ready.get("type") == wire.READY):
            errlog.seek(0)
            detail = errlog.read()[-2000:].decode("utf-8", "replace").strip()
            await self._kill()
            raise SandboxError(f"REPL worker failed to start: {detail or ready!r}")
        errlog.close()
        self.pid = int(ready.get("pid", 0)) or None

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

    async def _send(self, message: dict[str, Any], blob: bytes = b"") -> None:
        assert self.writer is not None
        self.writer.write(wire.encode(message) if not blob else wire.encode_header(message, len(blob)))
        view = memoryview(blob)
        for start in range(0, len(blob), BLOB_CHUNK):  # no copy of a large context, whole, in any buffer
            self.writer.write(view[start : start + BLOB_CHUNK])
            await self.writer.drain()
        await self.writer.drain()

    async def _kill(self) -> None:
        if self.reader_task:
            self.reader_task.cancel()
        if self.writer:
            self.writer.close()
        if self.proc and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.proc, self.writer, self.reader_task, self.workdir = None, None, None, None

    async def restart(self) -> None:
        await self._kill()
        self.restarts += 1
        await self._spawn()

    async def close(self) -> None:
        if self.proc and self.proc.returncode is None and self.writer:
            with contextlib.suppress(ConnectionError, BrokenPipeError):
                await self._send({"type": wire.SHUTDOWN})
        await self._kill()

    # --- cells --------------------------------------------------------------------------------------
    async def execute(
        self, code: str, rpc: RpcHandler, history_append: list[dict[str, Any]] | None = None
    ) -> ExecResult:
        if self.proc is None:
            raise SandboxError("the sandbox is not running")
        self.next_id += 1
        exec_id = self.next_id
        self.history.extend(history_append or [])
        started = time.monotonic()
        await self._send(
            {"type": wire.EXEC, "id": exec_id, "code": code, "history_append": history_append or []}
        )
        budget, used, rpc_calls = self.settings.cell_timeout_s, 0.0, 0
        active: dict[int, asyncio.Task[None]] = {}
        try:
            while True:
                t0 = time.monotonic()
                timeout = None if active else max(0.0, budget - used)
                try:
                    item = await asyncio.wait_for(self.frames.get(), timeout)
                except asyncio.TimeoutError:
                    await self.restart()
                    return ExecResult(
                        output="",
                        error=f"TimeoutError: the cell ran longer than {budget:g} s and was stopped; {RESTART_NOTE}",
                        restarted=True,
                        timed_out=True,
                        duration_s=time.monotonic() - started,
                        rpc_calls=rpc_calls,
                    )
                if not active:
                    used += time.monotonic() - t0
                if item is _EOF:
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
                if isinstance(item, tuple):  # ("rpc_done", id)
                    active.pop(item[1], None)
                    continue
                kind = item["type"]
                if kind == wire.RPC:
                    rid = item.get("id")
                    if (
                        not isinstance(rid, int)
                        or rid in active
                        or item.get("method") not in wire.RPC_METHODS
                    ):
                        raise ProtocolViolation(f"REPL worker sent a bad request: {str(item)[:200]}")
                    rpc_calls += 1
                    active[rid] = asyncio.create_task(self._answer(rid, item, rpc))
                elif kind == wire.EXEC_RESULT and item.get("id") == exec_id:
                    return ExecResult(
                        output=str(item.get("output", "")),
                        error=item.get("error"),
                        final=item.get("final"),
                        duration_s=time.monotonic() - started,
                        rpc_calls=rpc_calls,
                    )
                else:
                    raise ProtocolViolation(f"REPL worker sent an unexpected {kind!r} (id {item.get('id')})")
        finally:
            for task in active.values():
                task.cancel()

    async def _answer(self, rid: int, request: dict[str, Any], rpc: RpcHandler) -> None:
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
        try:
            await self._send({"type": wire.RPC_RESULT, "id": rid, **reply})
        except (ConnectionError, BrokenPipeError):
            pass  # the worker is gone; execute() sees the EOF and restarts it
        await self.frames.put(("rpc_done", rid))

    async def get_var(self, name: str) -> dict[str, Any]:
        if self.proc is None:
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
