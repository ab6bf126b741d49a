"""The host's side of a run's zygote: start it with the context, get workers from it, stop it.

One `WorkerPool` per run. The first sandbox that starts gives the run's context payload: the zygote
loads it once; every later worker forked for that same payload object inherits it copy-on-write, and a
worker for another payload (a child's new value) gets only that value, sent on its own pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

from rlmx.context.payload import ContextPayload
from rlmx.errors import ProtocolViolation, SandboxError, SandboxUnavailable
from rlmx.sandbox import frames, wire
from rlmx.sandbox.base import SandboxSettings
from rlmx.sandbox.isolation import FAULT_ENV, SIMULATE_ENV

# the folder rlmx is imported from (src/rlmx/sandbox/pool.py -> src): the workers' PYTHONPATH
SRC_ROOT = Path(__file__).resolve().parents[2]

REDUCED_ISOLATION_HINT = (
    "to run model code with reduced isolation, pass `sandbox`=process-unisolated "
    "(SandboxSettings(backend='process-unisolated')); rlmx doctor says what this host offers"
)
# layers a zygote of this process found it cannot build, and why: later zygotes skip them (one probe
# per process, never the context loaded twice to find out); by the test switches set (rlmx.sandbox.isolation)
KNOWN_UNAVAILABLE: dict[tuple[str, str], dict[str, str]] = {}


def worker_env(home: str) -> dict[str, str]:
    """The zygote's (and so every worker's) whole environment: what Python needs, no keys, tokens,
    secrets or proxies."""
    src_root = str(SRC_ROOT)
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


def zygote_env(home: str) -> dict[str, str]:
    env = worker_env(home)
    for name in (SIMULATE_ENV, FAULT_ENV):  # tests force the fallback paths with them (isolation.py)
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


@dataclass
class WorkerHandle:
    """A worker forked by the zygote: the host's ends of its pipes and a pidfd that kills it."""

    pid: int  # as the zygote sees it
    pidfd: int
    to_worker: int
    from_worker: int
    workdir: str = ""  # unisolated workers only: a host directory to remove afterwards
    closed: bool = field(default=False, repr=False)

    def kill(self) -> None:
        """SIGKILL the worker (isolated: its pid 1, which takes its whole PID namespace along)."""
        if self.closed:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.pidfd >= 0:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:  # no pidfds (not Linux; unisolated only): the worker leads its own process group
                os.killpg(self.pid, signal.SIGKILL)

    async def wait_exit(self, timeout: float = 5.0) -> None:
        """Wait until the process is gone (a pidfd turns readable when it exits)."""
        if self.closed or self.pidfd < 0:
            return
        try:
            await asyncio.wait_for(wait_readable(self.pidfd), timeout)
        except asyncio.TimeoutError:
            return  # it was SIGKILLed and will go; the pidfd is closed by release() either way

    def release(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.pidfd >= 0:
            os.close(self.pidfd)
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


class WorkerPool:
    """A run's zygote, started on the first `spawn` with that sandbox's payload."""

    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        self.layer = settings.layer  # auto | namespaces | landlock | none
        self.root_payload: ContextPayload | None = None
        self.proc: asyncio.subprocess.Process | None = None
        self.sock: socket.socket | None = None
        self.errlog: IO[bytes] | None = None
        self.lock = asyncio.Lock()
        self.next_id = 0
        self.isolation: frames.IsolationReport | None = None  # what the zygote said it could do
        self.starts = 0
        self.serving = False  # the zygote said READY: it reads requests (SHUTDOWN among them) now
        self.spawning: set[asyncio.Future[tuple[WorkerHandle, bool]]] = set()

    # --- the zygote ---------------------------------------------------------------------------------
    async def _start(self) -> None:
        assert self.root_payload is not None
        await self._stop()
        self.starts += 1
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.errlog = tempfile.TemporaryFile()
        tmp_base = tempfile.gettempdir()
        # where the zygote mounts its new root before it pivots (empty; removed once it has pivoted)
        known = dict(KNOWN_UNAVAILABLE.get(_switches(), {}))
        namespaces = self.layer == "namespaces" or (self.layer == "auto" and "namespaces" not in known)
        staging = tempfile.mkdtemp(prefix="rlmx-view-") if namespaces else ""
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "rlmx.sandbox.zygote",
                str(child.fileno()),
                pass_fds=(child.fileno(),),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=self.errlog,
                cwd="/",
                env=zygote_env(tmp_base),
                start_new_session=True,
            )
        finally:
            child.close()
        parent.setblocking(False)
        self.sock = parent
        s = self.settings
        payload = self.root_payload
        setup = frames.Setup(
            layer=cast(frames.LayerChoice, self.layer),
            unavailable=known,
            uid_first=s.worker_uid_first,
            uid_count=s.worker_uid_count,
            limits=frames.Rlimits(
                cpu_s=s.worker_cpu_s,
                memory_mb=s.memory_mb,
                processes=s.max_processes,
                file_mb=s.max_file_mb,
                open_files=s.max_open_files,
            ),
            scratch_mb=s.scratch_mb,
            staging=staging,
            tmp_base=tmp_base,
            context_kind=payload.kind,
            context_options=payload.options,
        )
        try:
            await send_frame(parent, setup, payload)
            reply, fds = await asyncio.wait_for(self._recv(), s.start_timeout_s)
        except (OSError, EOFError, asyncio.TimeoutError) as exc:
            detail = self.stderr_tail() or repr(exc)
            await self._stop()
            raise SandboxError(f"the sandbox's zygote failed to start: {detail}") from exc
        finally:
            if staging:
                with contextlib.suppress(OSError):
                    os.rmdir(staging)
        _close_all(fds)
        if isinstance(reply, frames.ZygoteFailed):
            await self._stop()
            if reply.error.startswith("cannot isolate"):
                raise SandboxUnavailable(f"{reply.error}; {REDUCED_ISOLATION_HINT}")
            raise SandboxError(reply.error)
        if not isinstance(reply, frames.ZygoteReady):
            await self._stop()
            raise ProtocolViolation(f"the sandbox's zygote answered setup with {reply.TYPE!r}")
        self.isolation = reply.isolation
        if self.layer == "auto":
            KNOWN_UNAVAILABLE.setdefault(_switches(), {}).update(reply.isolation.unavailable)
        self.serving = True

    def stderr_tail(self) -> str:
        if self.errlog is None:
            return ""
        self.errlog.seek(0)
        return self.errlog.read()[-2000:].decode("utf-8", "replace").strip()

    async def _recv(self) -> tuple[frames.Frame, list[int]]:
        """One frame from the zygote, and the file descriptors that came with it (ProtocolViolation:
        not a frame the zygote may send)."""
        assert self.sock is not None
        buf, fds = bytearray(), list[int]()
        try:
            while True:
                if len(buf) >= wire.HEADER.size:
                    json_len, blob_len = wire.decode_header(bytes(buf[: wire.HEADER.size]))
                    end = wire.HEADER.size + json_len
                    if blob_len or len(buf) > end:
                        raise ProtocolViolation("the sandbox's zygote sent more than one reply")
                    if len(buf) == end:
                        return _zygote_frame(bytes(buf[wire.HEADER.size :])), fds
                await wait_readable(self.sock.fileno())
                try:
                    data, new_fds, _, _ = socket.recv_fds(self.sock, 65536, 4)
                except (BlockingIOError, InterruptedError):
                    continue
                fds.extend(new_fds)
                if not data:
                    raise EOFError("the sandbox's zygote closed its socket")
                buf += data
        except BaseException:
            _close_all(fds)
            raise

    async def _stop(self) -> None:
        if self.sock is not None:
            if self.serving:
                with contextlib.suppress(OSError):
                    self.sock.sendall(frames.encode(frames.Shutdown()))
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            if not self.serving and self.proc.returncode is None:
                # still starting: it reads no request before it is ready, so it is not asked to leave
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)  # its session: the zygote goes with it
            if self.proc.returncode is None:
                try:
                    await asyncio.wait_for(self.proc.wait(), 2.0)
                except asyncio.TimeoutError:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(self.proc.pid, signal.SIGKILL)
                    await self.proc.wait()
            self.proc = None
        self.serving = False

    # --- workers ------------------------------------------------------------------------------------
    async def spawn(self, payload: ContextPayload) -> tuple[WorkerHandle, bool]:
        """A new worker; True when it inherited the zygote's context (else the host must send it).

        A caller cancelled meanwhile does not break the exchange with the zygote (which other REPLs of
        the run share): the request completes and the worker it made is killed."""
        task = asyncio.ensure_future(self._spawn_locked(payload))
        self.spawning.add(task)
        task.add_done_callback(self.spawning.discard)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(_discard_worker)
            raise

    async def _spawn_locked(self, payload: ContextPayload) -> tuple[WorkerHandle, bool]:
        async with self.lock:
            if self.root_payload is None:
                self.root_payload = payload
            inherit = payload is self.root_payload
            for attempt in (1, 2):
                if self.sock is None:
                    await self._start()
                try:
                    return await self._spawn(inherit), inherit
                except (OSError, EOFError, asyncio.TimeoutError) as exc:
                    detail = self.stderr_tail()
                    await self._stop()  # the zygote died or broke: start a new one, once
                    if attempt == 2:
                        raise SandboxError(f"the sandbox's zygote failed: {detail or exc}") from exc
                except BaseException:
                    await self._stop()  # the loop is closing mid-request: the socket may hold a stale reply
                    raise
        raise AssertionError("unreachable")

    async def _spawn(self, inherit: bool) -> WorkerHandle:
        assert self.sock is not None
        self.next_id += 1
        request = frames.Spawn(self.next_id, inherit)
        await asyncio.get_running_loop().sock_sendall(self.sock, frames.encode(request))
        reply, fds = await asyncio.wait_for(self._recv(), self.settings.start_timeout_s)
        if not isinstance(reply, frames.Spawned) or reply.id != self.next_id or len(fds) not in (2, 3):
            _close_all(fds)
            raise ProtocolViolation(f"the sandbox's zygote answered spawn with {reply.TYPE!r}")
        to_worker, from_worker, pidfd = (*fds, -1) if len(fds) == 2 else fds
        return WorkerHandle(reply.pid, pidfd, to_worker, from_worker, workdir=reply.workdir)

    async def close(self) -> None:
        """Stop the zygote and with it every worker. A spawn still under way (a REPL whose run ended
        before it started, e.g. with FINAL on the first turn) is cancelled: nobody will use it, and a
        zygote that is still starting is killed rather than waited for."""
        for task in list(self.spawning):
            task.cancel()
        async with self.lock:
            await self._stop()
        if self.errlog is not None:
            self.errlog.close()
            self.errlog = None


def _switches() -> tuple[str, str]:
    return os.environ.get(SIMULATE_ENV, ""), os.environ.get(FAULT_ENV, "")


async def send_frame(sock: socket.socket, frame: frames.Frame, payload: ContextPayload) -> None:
    """One frame with the payload attached as `context`, sent in slices: a 40 MB context is never
    copied whole."""
    loop = asyncio.get_running_loop()
    size = payload.size()
    await loop.sock_sendall(sock, frames.encode_header(frame, [("context", size)] if size else []))
    for piece in payload.pieces():
        await loop.sock_sendall(sock, piece)


def _zygote_frame(body: bytes) -> frames.Frame:
    try:
        frame, _ = frames.decode(wire.decode_body(body), b"", frames.ZYGOTE_TO_HOST)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ProtocolViolation(f"the sandbox's zygote sent a bad frame: {exc}") from None
    return frame


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _discard_worker(task: asyncio.Future[tuple[WorkerHandle, bool]]) -> None:
    """A worker made for a caller that was cancelled meanwhile: nobody will use it."""
    if task.cancelled() or task.exception() is not None:
        return
    handle, _ = task.result()
    handle.kill()
    handle.release()
    _close_all([handle.to_worker, handle.from_worker])


async def wait_readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, _settle, ready)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
