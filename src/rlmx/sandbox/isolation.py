"""Linux isolation primitives for the REPL's processes, through libc (ctypes; standard library only).

Used by the zygote (`rlmx.sandbox.zygote`), never by the host process. The pieces, in the order a
worker meets them:

1. `enter_user_namespace` -- the zygote enters a new user namespace. Started by root, it maps itself
   (inner uid 0) to root and a block of inner uids 1..N to unused outer uids, so every worker runs as
   its own unprivileged uid; started by another user, only that user is mapped (inner 0), and workers
   drop every capability instead.
2. `enter_run_namespaces`: mount, network, IPC and UTS namespaces, and a PID namespace whose pid 1 is
   the zygote; `rlmx.sandbox.rootfs.build_rootfs` then builds a read-only root on a tmpfs holding only
   what Python needs and `pivot_root`s into it: the rest of the host's files are not reachable.
3. Per worker, `enter_worker_namespaces` (in a fresh PID namespace): its own mount, network and IPC
   namespaces, a private /proc, a size-capped tmpfs on /tmp (the working directory) and /dev/shm.
4. `apply_rlimits` and `drop_privileges` in the worker itself, just before it serves.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME = 16384, 1 << 18, 1 << 21
MNT_DETACH = 2

# statvfs flags -> the mount flags a read-only re-mount must keep (a user namespace may not clear them)
_LOCKED_FLAGS: tuple[tuple[int, int], ...] = (
    (2, MS_NOSUID),
    (4, MS_NODEV),
    (8, MS_NOEXEC),
    (1024, MS_NOATIME),
    (2048, MS_NODIRATIME),
    (4096, MS_RELATIME),
)
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 1, 24, 28
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
SECBIT_NOROOT, SECBIT_NOROOT_LOCKED = 1, 2  # uid 0 gets no capabilities from execve
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_PIVOT_ROOT_NR = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}

WORKER_UIDS = 1000  # inner uids 1..WORKER_UIDS are mapped for workers when the zygote is started by root
SIMULATE_ENV = "RLMX_SANDBOX_SIMULATE"  # testing only: "unavailable" or "single-id"
FAULT_ENV = "RLMX_SANDBOX_FAULT"  # testing only: "namespaces-mount" fails the namespace layer midway

_libc = ctypes.CDLL(None, use_errno=True)


class IsolationUnavailable(OSError):
    """The platform does not let the zygote isolate workers (no namespaces, not Linux, ...)."""


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)), "setns")


def mount(source: str, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    result = _libc.mount(
        source.encode(),
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    _check(result, f"mount {source} on {target}")


def umount2(target: str, flags: int) -> None:
    _check(_libc.umount2(target.encode(), ctypes.c_int(flags)), f"umount {target}")


def prctl(option: int, arg2: int = 0) -> None:
    zero = ctypes.c_ulong(0)
    _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), zero, zero, zero), f"prctl {option}")


def set_parent_death_signal(sig: int = signal.SIGKILL) -> None:
    prctl(PR_SET_PDEATHSIG, int(sig))


def pivot_root(new_root: str, put_old: str) -> None:
    func = getattr(_libc, "pivot_root", None)
    if func is not None:
        _check(func(new_root.encode(), put_old.encode()), "pivot_root")
        return
    number = _PIVOT_ROOT_NR.get(os.uname().machine)
    if number is None:
        raise IsolationUnavailable(errno.ENOSYS, f"pivot_root is not known on {os.uname().machine}")
    _check(_libc.syscall(ctypes.c_long(number), new_root.encode(), put_old.encode()), "pivot_root")


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def set_capabilities(mask: int = 0) -> None:
    """The effective and permitted sets of this process become `mask` (a bit per capability); the
    inheritable set is emptied. 0: no capability at all."""
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    for word in range(2):
        data[word].effective = data[word].permitted = (mask >> (32 * word)) & 0xFFFFFFFF
    _check(_libc.capset(ctypes.byref(header), data), "capset")


def clear_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets of this process."""
    set_capabilities(0)


def capability_set(kind: str = "CapEff") -> int:
    """This process's `kind` set (CapEff, CapPrm, CapBnd, ...) as /proc/self/status shows it; 0 if unreadable."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(kind + ":"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except OSError:
        return 63  # dropping unknown capabilities fails with EINVAL, which is ignored below


def bind_readonly(source: str, target: str) -> None:
    mount(source, target, None, MS_BIND | MS_REC)
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
    locked = os.statvfs(source).f_flag
    for st_flag, ms_flag in _LOCKED_FLAGS:
        if locked & st_flag:
            flags |= ms_flag
    mount("none", target, None, flags)


# --- the zygote's own namespaces ------------------------------------------------------------------


@dataclass(frozen=True)
class IdMap:
    """How inner ids map to outer ones in the run's user namespace."""

    worker_ids: tuple[int, ...]  # inner uids (and gids) workers take in turn; () = stay 0, drop capabilities
    outer_base: int = 0  # the outer uid of inner uid 1 (range mode)

    @property
    def single(self) -> bool:
        return not self.worker_ids


def simulated() -> str:
    return os.environ.get(SIMULATE_ENV, "")


def _outer_base() -> int:
    """A block of outer uids nobody uses, different for each run started at the same time."""
    return 2_000_000_000 + (os.getpid() % 2_000_000) * 1024


def enter_user_namespace() -> IdMap:
    """Enter a new user namespace with its uid/gid maps written by a helper left in the parent namespace.

    The calling process must be single-threaded (the kernel refuses otherwise)."""
    if simulated() == "unavailable":
        raise IsolationUnavailable(errno.EPERM, "user namespaces are not permitted (simulated)")
    if not sys.platform.startswith("linux") or not hasattr(_libc, "unshare"):
        raise IsolationUnavailable(errno.ENOSYS, f"namespaces need Linux; this is {sys.platform}")
    single = os.geteuid() != 0 or simulated() == "single-id"
    uid, gid = os.geteuid(), os.getegid()
    base = _outer_base()
    if single:
        uid_map, gid_map = f"0 {uid} 1\n", f"0 {gid} 1\n"
    else:
        uid_map = f"0 0 1\n1 {base} {WORKER_UIDS}\n"
        gid_map = f"0 0 1\n1 {base} {WORKER_UIDS}\n"
    go_r, go_w = os.pipe()
    target = os.getpid()
    helper = os.fork()
    if helper == 0:  # stays in the parent namespace: only it may write a multi-line map
        code = 1
        try:
            os.close(go_w)
            if os.read(go_r, 1) == b"u":
                if single:
                    _write(f"/proc/{target}/setgroups", "deny")
                _write(f"/proc/{target}/uid_map", uid_map)
                _write(f"/proc/{target}/gid_map", gid_map)
                code = 0
        except OSError as exc:
            sys.stderr.write(f"rlmx zygote: cannot write the id maps: {exc}\n")
        finally:
            os._exit(code)
    os.close(go_r)
    try:
        unshare(CLONE_NEWUSER)
    except OSError as exc:
        os.close(go_w)
        os.waitpid(helper, 0)
        raise IsolationUnavailable(exc.errno, f"cannot create a user namespace ({exc.strerror})") from exc
    os.write(go_w, b"u")
    os.close(go_w)
    _, status = os.waitpid(helper, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise IsolationUnavailable(errno.EPERM, "cannot map ids into the user namespace")
    if single:
        return IdMap(())
    return IdMap(tuple(range(1, WORKER_UIDS + 1)), base)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter_run_namespaces() -> None:
    """Mount, network, IPC and UTS namespaces for the zygote; its next child is pid 1 of a new PID one."""
    unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWPID)
    mount("none", "/", None, MS_REC | MS_PRIVATE)  # nothing we mount propagates back to the host
    name = b"rlmx-sandbox"
    _check(_libc.sethostname(name, ctypes.c_size_t(len(name))), "sethostname")


def forbid_user_namespaces() -> None:
    """No process of the run's user namespace may create another one (less kernel surface for workers)."""
    _write("/proc/sys/user/max_user_namespaces", "0")


# --- a worker's own namespaces, limits and identity -------------------------------------------------


def enter_worker_namespaces(*, scratch_mb: int, uid: int, next_pid: int, keep: Sequence[str] = ()) -> None:
    """In the worker's pid 1 (a fresh PID namespace): own mount, network and IPC namespaces, a private
    /proc, and size-capped tmpfs mounts for /tmp (the working directory) and /dev/shm. `next_pid` is
    the pid the next process in the namespace gets (so the workers of a run have distinct pids).
    `keep`: paths of the view under /tmp (e.g. a virtual environment there), bound again, read-only,
    inside the new /tmp."""
    unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    try:
        _write("/proc/sys/kernel/ns_last_pid", str(next_pid - 1))
    except OSError as exc:  # an older kernel: pids repeat across workers, nothing else changes
        sys.stderr.write(f"rlmx zygote: ns_last_pid not set: {exc}\n")
    inodes = max(1024, scratch_mb * 64)
    opts = f"size={scratch_mb}m,nr_inodes={inodes},mode=0700,uid={uid},gid={uid}"
    kept = [(path, os.open(path, os.O_PATH | os.O_CLOEXEC)) for path in keep]
    mount("rlmx-tmp", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts)
    for path, fd in kept:
        os.makedirs(path, mode=0o755, exist_ok=True)
        bind_readonly(f"/proc/self/fd/{fd}", path)
        os.close(fd)
    mount(
        "rlmx-shm",
        "/dev/shm",
        "tmpfs",
        MS_NOSUID | MS_NODEV | MS_NOEXEC,
        f"size=16m,mode=0700,uid={uid},gid={uid}",
    )


@dataclass(frozen=True)
class ResourceLimits:
    cpu_s: int  # hard RLIMIT_CPU over the process's life (a cell's own limit is a soft one, see worker.py)
    memory_mb: int  # address space on top of what the process holds when it starts (the context)
    processes: int
    file_mb: int
    open_files: int


def address_space_now() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def apply_rlimits(limits: ResourceLimits) -> None:
    mb = 1024 * 1024
    wanted = {
        resource.RLIMIT_CPU: limits.cpu_s,
        resource.RLIMIT_AS: address_space_now() + limits.memory_mb * mb,
        resource.RLIMIT_NPROC: limits.processes,
        resource.RLIMIT_FSIZE: limits.file_mb * mb,
        resource.RLIMIT_NOFILE: limits.open_files,
        resource.RLIMIT_CORE: 0,
    }
    for kind, value in wanted.items():
        _, hard = resource.getrlimit(kind)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (value, value))


def drop_privileges(inner_uid: int | None) -> None:
    """Become unprivileged for good: no capabilities (bounding and ambient sets included), no
    supplementary groups, `no_new_privs`; with `inner_uid`, also that uid and gid."""
    for cap in range(last_capability() + 1):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED)
    if inner_uid is not None:
        os.setgroups([])
        os.setresgid(inner_uid, inner_uid, inner_uid)
        os.setresuid(inner_uid, inner_uid, inner_uid)  # from uid 0 to another: every capability goes
    clear_capabilities()
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def close_fds_except(keep: Iterable[int]) -> None:
    low = 3
    for fd in sorted(set(keep)):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
