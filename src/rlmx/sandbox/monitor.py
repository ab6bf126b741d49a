"""A worker of the Landlock layer and its monitor (see `rlmx.sandbox.confine` for the layer).

`spawn`, in the zygote, forks M, the monitor; M forks C, the worker, confines it and lets it serve the
host. M is a child subreaper and never runs model code: it reaps what C leaves behind, measures C's
scratch directory every `SCRATCH_CHECK_S` seconds (the cap's tolerance: what C writes in that time,
each file at most RLIMIT_FSIZE), and once C ends -- or the zygote asks (SIGTERM), or the zygote dies
(its parent-death signal) -- kills every process left (the worker's uid's, its session's, and every
one it adopted, found in /proc until a look finds none) and removes the scratch directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import sys
import traceback
from dataclasses import dataclass

from rlmx.sandbox import confine, isolation, worker

SCRATCH_CHECK_S = 0.25


@dataclass
class Started:
    fds: list[int]  # the host's ends: to the worker, from the worker, a pidfd of the worker
    worker_pid: int
    monitor_pid: int


def spawn(
    plan: confine.Plan, limits: isolation.ResourceLimits, scratch_mb: int, ctrl: socket.socket
) -> Started:
    """In the zygote: M and C under it; the host gets C's pipes and a pidfd of C."""
    slot = confine.acquire_slot(plan)
    to_worker_r, to_worker_w = os.pipe()
    from_worker_r, from_worker_w = os.pipe()
    told_r, told_w = os.pipe()  # M -> zygote: C's pid
    ack_r, ack_w = os.pipe()  # zygote -> M: C's pidfd is open (until then C is not reaped)
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            for fd in (to_worker_w, from_worker_r, told_r, ack_w):
                os.close(fd)
            ctrl.close()
            code = _monitor(plan, limits, scratch_mb, slot, (to_worker_r, from_worker_w), told_w, ack_r)
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(slot.lock_fd)  # M holds the lock now
    for fd in (to_worker_r, from_worker_w, told_w, ack_r):
        os.close(fd)
    fds = [to_worker_w, from_worker_r]
    try:
        told = os.read(told_r, 32)
        worker_pid = int(told) if told else pid  # nothing: M failed; the host sees the worker not start
        fds.append(os.pidfd_open(worker_pid))
        os.write(ack_w, b"k")
    finally:
        os.close(told_r)
        os.close(ack_w)
    return Started(fds, worker_pid, pid)


def _monitor(
    plan: confine.Plan,
    limits: isolation.ResourceLimits,
    scratch_mb: int,
    slot: confine.Slot,
    pipes: tuple[int, int],
    told_w: int,
    ack_r: int,
) -> int:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    waited = {signal.SIGCHLD, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    isolation.prctl(confine.PR_SET_CHILD_SUBREAPER, 1)
    isolation.set_parent_death_signal(signal.SIGTERM)
    os.setpgid(0, 0)  # a kill of the zygote's process group (the host's last resort) leaves M to sweep
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, waited)
            os.close(told_w)
            os.close(ack_r)
            os.close(slot.lock_fd)
            _worker(plan, limits, slot, *pipes)
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    for fd in pipes:
        os.close(fd)
    os.write(told_w, str(pid).encode())
    os.close(told_w)
    os.read(ack_r, 1)
    os.close(ack_r)
    return watch(pid, slot, scratch_mb)


def _worker(
    plan: confine.Plan, limits: isolation.ResourceLimits, slot: confine.Slot, in_fd: int, out_fd: int
) -> None:
    """C: confined, then serving the host."""
    os.setsid()
    os.chdir(slot.scratch)
    os.environ.update(HOME=slot.scratch, TMPDIR=slot.scratch)
    isolation.close_fds_except([in_fd, out_fd])

    def apply_limits(nproc: int) -> None:
        isolation.apply_rlimits(
            isolation.ResourceLimits(limits.cpu_s, limits.memory_mb, nproc, limits.file_mb, limits.open_files)
        )

    confine.confine_worker(plan, slot, nproc=limits.processes, apply_limits=apply_limits)
    worker.serve_forked(in_fd, out_fd)


def leftovers(parent: int, uid: int | None, session: int) -> list[int]:
    """The worker's processes: those whose parent is `parent` (orphans a subreaper adopted), whose
    session is the worker's own (`session`: it called setsid), or whose real uid is `uid` (a uid of
    its own). Read from /proc in one pass (this kernel may lack .../children; a fork of this large
    process per look would cost tens of milliseconds)."""
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            ppid, sid = int(fields[1]), int(fields[3])
            real_uid = -1
            if uid is not None:
                with open(f"/proc/{name}/status", "rb") as fh:
                    line = next(ln for ln in fh if ln.startswith(b"Uid:"))
                real_uid = int(line.split()[1])
        except (OSError, IndexError, ValueError, StopIteration):
            continue
        if ppid == parent or sid == session or (uid is not None and real_uid == uid):
            found.append(int(name))
    return found


def scratch_bytes(path: str) -> int:
    total = 0
    stack = [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += info.st_blocks * 512
                    if stat.S_ISDIR(info.st_mode):
                        stack.append(entry.path)
        except OSError:
            continue
    return total


def watch(worker: int, slot: confine.Slot, scratch_mb: int) -> int:
    """In M, the worker's parent (a subreaper): wait for the worker, keep its scratch under the cap,
    then kill everything left and remove the scratch. Returns the worker's exit code."""
    waited = {signal.SIGCHLD, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    cap = scratch_mb * 1024 * 1024
    code = 0
    while True:
        got = signal.sigtimedwait(waited, SCRATCH_CHECK_S)
        if got is not None and got.si_signo == signal.SIGTERM:
            code = 137
            break
        done, code = _reap(worker)
        if done:
            break
        if scratch_bytes(slot.scratch) > cap:
            sys.stderr.write(
                f"rlmx: the REPL's scratch directory went over its cap ({scratch_mb} MB); the worker was stopped\n"
            )
            sys.stderr.flush()
            code = 137
            break
    _sweep(slot, worker)
    shutil.rmtree(slot.scratch, ignore_errors=True)
    confine.release_slot(slot)
    return code


def _reap(worker: int) -> tuple[bool, int]:
    """Reap every child that ended; (True, code) once the worker itself has."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True, 0
        if pid == 0:
            return False, 0
        if pid == worker:
            return True, os.waitstatus_to_exitcode(status) & 0xFF
        # an orphan the worker left: reaped; the worker goes on


def _sweep(slot: confine.Slot, worker: int) -> None:
    """Kill the worker and everything it started (its uid's processes, and every orphan this subreaper
    adopted), and reap them, until a look finds none: a fork bomb loses (its processes die faster
    than they fork, and RLIMIT_NPROC bounds them)."""
    me = os.getpid()
    for _ in range(1000):
        left = leftovers(me, slot.uid, worker)
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _reap_all()
    _reap_all()


def _reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
