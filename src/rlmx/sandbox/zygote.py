"""The zygote: one warm, single-threaded process per run that holds the context and forks REPL workers.

Started by the host as `python -m rlmx.sandbox.zygote CTRL_FD`, with a minimal environment. On its
control socket it receives one SETUP frame (settings and the run's context payload), loads the context
once, isolates itself (unless told not to), says ZYGOTE_READY (or ZYGOTE_FAILED with the reason), then
answers SPAWN requests until SHUTDOWN or the host goes away. Each SPAWNED reply carries, as SCM_RIGHTS,
the host's ends of the new worker's two pipes and a pidfd to kill it with.

Isolated process tree (`--sandbox process`, the default)::

    host -> O (waits; it entered the run's user namespace and made the zygote pid 1 of a PID namespace)
              -> Z, the zygote: pid 1; mount/net/IPC/UTS namespaces; pivoted into a read-only view
                   -> B, a worker's pid 1 (fresh PID, mount, net and IPC namespaces; /proc, /tmp)
                        -> C, the worker: unprivileged, rlimits, serves the host on its pipes

Killing B (the pidfd the host holds) ends the worker's whole PID namespace: nothing it started
survives. Every process down the chain dies with its parent (PR_SET_PDEATHSIG).

Where no namespace can be made (a container), the zygote itself forks, per worker, a monitor M and
the worker C under it, confined by Landlock, seccomp and a uid of its own (`rlmx.sandbox.confine`).
With `layer="auto"` the namespaces are tried first, in a forked child, so a failure at any step (a
refused `unshare`, a mount that AppArmor forbids) leaves this process as it was to try the next
layer: the context is loaded once either way. Without isolation (`process-unisolated`) the zygote
forks C directly, in its own session, and only the rlimits, the minimal environment, the closed fds
and a fresh working directory apply.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import sys
import tempfile
import time
import traceback
from typing import Any

from rlmx.sandbox import confine, frames, isolation, landlock, monitor, rootfs, seccomp, worker

MONITORS_WAIT_S = 1.5  # at its end, how long the zygote waits for its monitors' sweeps (the host waits 2 s)


class Zygote:
    def __init__(
        self,
        ctrl: socket.socket,
        setup: frames.Setup,
        bound: list[str],
        ids: isolation.IdMap | None,
        *,
        plan: confine.Plan | None = None,
        worker_filter: seccomp.Filter | None = None,
    ) -> None:
        self.ctrl = ctrl
        self.setup = setup
        self.ids = ids  # None: no namespaces
        self.plan = plan  # the Landlock layer's
        self.worker_filter = worker_filter  # loaded by each worker of the namespace layer
        limits = setup.limits
        self.limits = isolation.ResourceLimits(
            limits.cpu_s, limits.memory_mb, limits.processes, limits.file_mb, limits.open_files
        )
        self.scratch_mb = setup.scratch_mb
        # parts of the view under /tmp (a venv or checkout there), which each worker's own /tmp would hide
        self.under_tmp = [p for p in bound if p.startswith("/tmp/")]
        self.pidns_fd = -1
        self.spawned = 0
        self.children: set[int] = set()

    @property
    def isolated(self) -> bool:
        return self.ids is not None

    # --- the loop -----------------------------------------------------------------------------------
    def serve(self) -> None:
        if self.isolated:
            self.pidns_fd = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, self._reap)
        gc.freeze()  # the context's objects stay out of the collector's way: no copy-on-write by gc
        try:
            while True:
                try:
                    message, _ = frames.read(self.ctrl.fileno(), frames.HOST_TO_ZYGOTE)
                except EOFError:
                    return
                except frames.ProtocolError as exc:
                    raise SystemExit(f"rlmx zygote: protocol violation: {exc}") from None
                if isinstance(message, frames.Spawn):
                    # no reaping until the new child's pidfd is open: its pid cannot be reused meanwhile
                    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
                    try:
                        self.spawn(message)
                    finally:
                        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
                elif isinstance(message, frames.Shutdown):
                    return
                else:
                    raise SystemExit(f"rlmx zygote: protocol violation: unexpected {message.TYPE!r}")
        finally:
            self.kill_all()

    def _reap(self, signum: int = 0, frame: Any = None) -> None:
        if not hasattr(os, "waitid"):  # not Linux (unisolated only): reap without looking first
            self._reap_plain()
            return
        while True:
            try:  # look first without reaping: the pid (and its group) cannot be reused meanwhile
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None or info.si_pid == 0:
                return
            pid = info.si_pid
            if not self.isolated and self.plan is None:  # what the worker started lives on in its group
                self._killpg(pid)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass  # a SIGCHLD arriving meanwhile ran this handler again, and that call reaped it
            self.children.discard(pid)

    def _reap_plain(self) -> None:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._killpg(pid)
            self.children.discard(pid)

    @staticmethod
    def _killpg(pid: int) -> None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return

    def kill_all(self) -> None:
        for pid in list(self.children):
            if self.plan is not None:  # a monitor: it kills its worker and sweeps what is left
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
            elif self.isolated:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue
            else:
                self._killpg(pid)
        if self.plan is not None:
            self._wait_monitors(MONITORS_WAIT_S)

    def _wait_monitors(self, within_s: float) -> None:
        """Until every monitor has swept its worker's processes and scratch (or `within_s` passed): the
        run is not over while anything it started lives."""
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        deadline = time.monotonic() + within_s
        left = set(self.children)
        while left and time.monotonic() < deadline:
            for pid in list(left):
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done = pid
                if done:
                    left.discard(pid)
            if left:
                time.sleep(0.005)

    # --- workers ------------------------------------------------------------------------------------
    def spawn(self, message: frames.Spawn) -> None:
        if self.plan is not None:
            started = monitor.spawn(self.plan, self.limits, self.scratch_mb, self.ctrl)
            self.children.add(started.monitor_pid)
            fds = started.fds
            reply = frames.Spawned(message.id, started.worker_pid, "")
            try:
                socket.send_fds(self.ctrl, [frames.encode(reply)], fds)
            finally:
                for fd in fds:
                    os.close(fd)
            return
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        workdir = "" if self.isolated else tempfile.mkdtemp(prefix="rlmx-repl-", dir=self.setup.tmp_base)
        uid = self._next_uid()
        if self.isolated:
            isolation.unshare(isolation.CLONE_NEWPID)
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                os.close(to_worker_w)
                os.close(from_worker_r)
                self._child(to_worker_r, from_worker_w, uid, workdir)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        if self.isolated:
            isolation.setns(self.pidns_fd, isolation.CLONE_NEWPID)
        self.children.add(pid)
        os.close(to_worker_r)
        os.close(from_worker_w)
        fds = [to_worker_w, from_worker_r]
        if hasattr(os, "pidfd_open"):  # Linux: the host kills exactly this process, never a reused pid
            fds.append(os.pidfd_open(pid))
        reply = frames.Spawned(message.id, pid, workdir)
        try:
            socket.send_fds(self.ctrl, [frames.encode(reply)], fds)
        finally:
            for fd in fds:
                os.close(fd)

    def _next_uid(self) -> int | None:
        self.spawned += 1
        if self.ids is None or self.ids.single:
            return None
        return self.ids.worker_ids[(self.spawned - 1) % len(self.ids.worker_ids)]

    def _child(self, in_fd: int, out_fd: int, uid: int | None, workdir: str) -> None:
        """In the new child: B (the worker's pid 1) when isolated, else the worker itself."""
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        isolation.set_parent_death_signal()
        self.ctrl.close()
        if self.pidns_fd >= 0:
            os.close(self.pidns_fd)
        if not self.isolated:
            os.setsid()
            self._worker(in_fd, out_fd, uid, workdir)
            return
        next_pid = 100 + self.spawned % 4_000_000
        isolation.enter_worker_namespaces(
            scratch_mb=self.scratch_mb, uid=uid or 0, next_pid=next_pid, keep=self.under_tmp
        )
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                self._worker(in_fd, out_fd, uid, "/tmp")
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(in_fd)
        os.close(out_fd)
        isolation.close_fds_except([])
        while True:  # pid 1 of the worker's namespace: reap orphans; leave with the worker
            try:
                done, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return
            if done == pid:
                os._exit(os.waitstatus_to_exitcode(status) & 0xFF)

    def _worker(self, in_fd: int, out_fd: int, uid: int | None, workdir: str) -> None:
        os.chdir(workdir)
        os.environ.update(HOME=workdir, TMPDIR=workdir)
        isolation.close_fds_except([in_fd, out_fd])
        isolation.apply_rlimits(self.limits)
        if self.isolated:
            isolation.drop_privileges(uid)
            if self.worker_filter is not None:
                self.worker_filter.load()
        worker.serve_forked(in_fd, out_fd)


def _fail(ctrl: socket.socket, error: str) -> None:
    ctrl.sendall(frames.encode(frames.ZygoteFailed(error)))


def _ready(ctrl: socket.socket, report: frames.IsolationReport) -> None:
    ctrl.sendall(frames.encode(frames.ZygoteReady(report)))


def _try_namespaces(
    ctrl: socket.socket, setup: frames.Setup, filt: seccomp.Filter | None, report: frames.IsolationReport
) -> str:
    """The namespace layer, built in a forked child (O, which enters the namespaces, and Z under it,
    the zygote): on success this process only waits and never returns; on failure at any step it
    returns why, unchanged, for the next layer to be tried."""
    status_r, status_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(status_r)
        _namespace_child(ctrl, setup, filt, report, status_w)  # never returns
    os.close(status_w)
    status = b""
    while chunk := os.read(status_r, 4096):
        status += chunk
    os.close(status_r)
    if status == b"ok":  # Z serves: this process outlives nothing -- its death takes the run along
        ctrl.close()
        _, code = os.waitpid(pid, 0)
        os._exit(os.waitstatus_to_exitcode(code) & 0xFF)
    os.waitpid(pid, 0)
    return status.decode("utf-8", "replace") or "the namespace layer failed to start (see its stderr)"


def _namespace_child(
    ctrl: socket.socket,
    setup: frames.Setup,
    filt: seccomp.Filter | None,
    report: frames.IsolationReport,
    status_w: int,
) -> None:
    try:
        isolation.set_parent_death_signal()
        ids = isolation.enter_user_namespace()
    except OSError as exc:
        os.write(status_w, f"no user namespaces ({exc.strerror or exc})".encode())
        os._exit(1)
    try:
        isolation.enter_run_namespaces()
        isolation.set_parent_death_signal()
    except OSError as exc:
        os.write(status_w, f"the namespace layer failed ({exc.strerror or exc})".encode())
        os._exit(1)
    pid = os.fork()
    if pid:  # O: waits; its death (PDEATHSIG) takes the zygote and every worker with it
        ctrl.close()
        os.close(status_w)
        _, code = os.waitpid(pid, 0)
        os._exit(os.waitstatus_to_exitcode(code) & 0xFF)
    isolation.set_parent_death_signal()
    bound: list[str] = []
    try:
        if os.environ.get(isolation.FAULT_ENV) == "namespaces-mount":
            raise OSError(13, "mount: Permission denied (a fault injected by RLMX_SANDBOX_FAULT)")
        first_uid = ids.worker_ids[0] if ids.worker_ids else 0
        bound.extend(rootfs.build_rootfs(staging=setup.staging, first_worker_uid=first_uid))
        isolation.forbid_user_namespaces()
    except OSError as exc:
        os.write(status_w, f"the namespace layer failed: cannot build the file view ({exc})".encode())
        os._exit(1)
    os.write(status_w, b"ok")
    os.close(status_w)
    report.layer = "namespaces"
    report.worker_ids = "shared" if ids.single else "per-worker"
    report.visible = bound
    _ready(ctrl, report)
    _serve(Zygote(ctrl, setup, bound, ids, worker_filter=filt))


def _serve(zygote: Zygote) -> None:
    zygote.serve()
    # Its children are killed and nothing is left to flush but stderr: leaving without the interpreter's
    # teardown (which frees the whole context object by object) ends the run ~30 ms sooner.
    sys.stderr.flush()
    os._exit(0)


def _filter(report: frames.IsolationReport) -> seccomp.Filter | None:
    """The seccomp filter for the namespace layer's workers, built before the view hides libseccomp's
    file; None (and why, in the report) where seccomp is not available."""
    reason = seccomp.unavailable_reason()
    if reason is None:
        try:
            return seccomp.worker_filter()
        except OSError as exc:
            reason = str(exc)
    report.notes.append(f"workers run without a seccomp filter: {reason}")
    report.seccomp = False
    return None


def _layers(ctrl: socket.socket, setup: frames.Setup) -> None:
    """Try the layers `setup.layer` allows, in order; serve with the first that works, or fail."""
    wanted = setup.layer
    why = dict(setup.unavailable)  # what the host already learned in this process
    report = frames.IsolationReport(
        layer="none",
        worker_ids="none",
        visible=[],
        landlock_abi=landlock.abi(),
        seccomp=True,
        unavailable=why,
    )
    if wanted == "none":
        report.seccomp = False
        _ready(ctrl, report)
        _serve(Zygote(ctrl, setup, [], None))
    if wanted in ("auto", "namespaces") and "namespaces" not in why:
        why["namespaces"] = _try_namespaces(ctrl, setup, _filter(report), report)
        report.notes.clear()
        report.seccomp = True
    if wanted in ("auto", "landlock") and "landlock" not in why:
        try:
            plan = confine.make_plan(
                explicit=wanted == "landlock",
                uid_first=setup.uid_first,
                uid_count=setup.uid_count,
                tmp_base=setup.tmp_base,
            )
        except OSError as exc:
            why["landlock"] = exc.strerror or str(exc)
        else:
            report.layer = "landlock"
            report.worker_ids = "per-worker" if plan.per_worker_uid else "shared"
            report.visible = list(plan.paths)
            report.landlock_abi = plan.abi
            report.notes.extend(plan.notes)
            _ready(ctrl, report)
            _serve(Zygote(ctrl, setup, [], None, plan=plan))
    tried = [name for name in ("namespaces", "landlock") if name in why]
    _fail(ctrl, "cannot isolate model code here: " + "; ".join(why[name] for name in tried))


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]  # `-m` put the working directory first; it is not part of the view
    isolation.set_parent_death_signal()
    ctrl = socket.socket(fileno=int(args[0]))
    try:
        setup, attached = frames.read(ctrl.fileno(), frames.HOST_TO_ZYGOTE)
    except frames.ProtocolError as exc:
        raise SystemExit(f"rlmx zygote: protocol violation: {exc}") from None
    if not isinstance(setup, frames.Setup):
        raise SystemExit("rlmx zygote: protocol violation: the first frame must be setup")
    try:
        context = worker.load_context(setup.context_kind, attached.pop("context", b""), setup.context_options)
    except (OSError, ValueError) as exc:
        _fail(ctrl, f"cannot load the context: {exc}")
        return
    del attached
    worker.inherit_context(context)
    _layers(ctrl, setup)


if __name__ == "__main__":
    main()
