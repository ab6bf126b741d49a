"""Landlock for the REPL's workers: a filesystem, TCP and IPC-scope allow-list (ctypes; standard library only).

The second isolation layer, for containers where user namespaces are not offered (`isolation` is the
first). A worker builds its ruleset with `prepare` while it can still open every path it will need (before
it drops to its unprivileged uid), then calls `Prepared.enforce` just before it serves: from then on the
worker and everything it forks can only reach what the `Policy` lists. Landlock cannot be undone.

The three system calls have the same numbers on every architecture of the unified table (x86_64,
aarch64, riscv64, ...): landlock_create_ruleset 444, landlock_add_rule 445, landlock_restrict_self 446.

Notes (measured on Linux 6.18, ABI 7):

- What each ABI adds. v1 (5.13): 13 filesystem rights -- EXECUTE, WRITE_FILE, READ_FILE, READ_DIR,
  REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM;
  moving a file to another directory is always refused. v2 (5.19): REFER (rename/link across
  directories, granted only inside `read_write`). v3 (6.2): TRUNCATE. v4 (6.7): TCP BIND_TCP and
  CONNECT_TCP. v5 (6.10): IOCTL_DEV (ioctl on device files). v6 (6.12): scopes -- abstract unix sockets
  and signals to processes outside the domain. v7 (6.15): audit logging flags only (no new rights).
  Below v4 the network is open and below v6 abstract sockets and signals are: pair low ABIs with seccomp.
- Not covered by any ABI: chmod, chown, utime, xattrs, stat/lstat/readlink/access of any path (a worker
  can still see that /etc/shadow exists, its size and owner -- not its content), chdir, path walking
  through unlisted directories, sockets other than TCP (UDP, unix sockets by path once made), and
  operations on file descriptors opened before `enforce`. ptrace of processes outside the domain is
  refused since v1.
- `enforce` restricts the calling thread and what it starts afterwards, not the process's other
  threads: call it while the worker is single-threaded.
- /etc: only the loader's files and localtime. /etc/passwd and /etc/group are left out on purpose (world
  readable, but they name the host's users; the namespace layer showed synthetic ones): `pwd` lookups
  fail, `os.path.expanduser` still works from $HOME. /proc, /sys, /tmp and $HOME are out; os.cpu_count
  and os.getpid and the like are system calls and keep working.
- Cost: `prepare(Policy(read_exec=python_paths(), ...))` then `enforce()` takes a median of about
  1 ms (0.9 ms: 50 forked children, tests/sandbox/test_landlock.py::test_cost).
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
from dataclasses import dataclass

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # unified table: x86_64 and aarch64
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_REMOVE_DIR, FS_REMOVE_FILE, FS_MAKE_CHAR, FS_MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
FS_MAKE_REG, FS_MAKE_SOCK, FS_MAKE_FIFO, FS_MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
FS_MAKE_SYM, FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 12, 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

FS_V1 = (1 << 13) - 1  # the 13 rights of ABI 1


def fs_rights(abi: int) -> int:
    """Every filesystem right ABI `abi` knows."""
    mask = FS_V1 if abi >= 1 else 0
    if abi >= 2:
        mask |= FS_REFER
    if abi >= 3:
        mask |= FS_TRUNCATE
    if abi >= 5:
        mask |= FS_IOCTL_DEV
    return mask


# the only rights a non-directory may get (the kernel refuses a rule with others: EINVAL)
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
READ_EXEC = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
DEVICE = FS_READ_FILE | FS_WRITE_FILE

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int


class LandlockError(OSError):
    """A Landlock step failed; `str()` is one line naming the step and the errno."""

    def __str__(self) -> str:
        return str(self.strerror)


def _fail(step: str, err: int) -> LandlockError:
    name = errno.errorcode.get(err, str(err))
    return LandlockError(err, f"{step}: {name} ({os.strerror(err)})")


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the kernel's header: 12 bytes
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _syscall(number: int, *args: int | ctypes.c_void_p) -> tuple[int, int]:
    """The raw system call, every argument passed as a full C long; returns (result, errno)."""
    ctypes.set_errno(0)
    c_args = [a if isinstance(a, ctypes.c_void_p) else ctypes.c_long(a) for a in args]
    result = int(_libc.syscall(ctypes.c_long(number), *c_args))
    return result, (ctypes.get_errno() if result < 0 else 0)


_probe: tuple[int, int] | None = None  # (abi, errno), once per process


def _probe_abi() -> tuple[int, int]:
    global _probe
    if _probe is None:
        result, err = _syscall(SYS_CREATE_RULESET, ctypes.c_void_p(None), 0, CREATE_RULESET_VERSION)
        _probe = (result, 0) if result >= 1 else (0, err or errno.EOPNOTSUPP)
    return _probe


def abi() -> int:
    """The highest Landlock ABI the kernel offers; 0 when it offers none."""
    return _probe_abi()[0]


def unavailable_reason() -> str | None:
    """None when Landlock is usable (ABI >= 1); else one clause saying why not."""
    version, err = _probe_abi()
    if version >= 1:
        return None
    if err == errno.ENOSYS:
        return (
            "the kernel has no Landlock (Linux >= 5.13 with CONFIG_SECURITY_LANDLOCK), "
            "or the container runtime hides it (landlock_create_ruleset: ENOSYS)"
        )
    if err == errno.EOPNOTSUPP:
        return "Landlock is built in but disabled at boot (add landlock to the lsm= kernel parameter)"
    if err == errno.EPERM:
        return "the container runtime refuses Landlock (landlock_create_ruleset: EPERM)"
    return f"landlock_create_ruleset: {os.strerror(err)}"


@dataclass(frozen=True)
class Policy:
    """What a worker may reach once the policy is enforced; everything else is refused.

    `read_exec`: directories or files, read + execute (+ list, for directories). `read_write`:
    directories, every right the ABI handles (the worker's scratch). `devices`: files such as /dev/null,
    read + write only (no ioctl from ABI 5). `deny_tcp`: from ABI 4, no TCP bind or connect at all.
    `scope`: from ABI 6, no abstract unix socket or signal reaches outside the worker's domain.
    """

    read_exec: tuple[str, ...] = ()
    read_write: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    deny_tcp: bool = True
    scope: bool = True


class Prepared:
    """A ruleset built by `prepare`, not yet enforced: `enforce()` once, or `close()`."""

    def __init__(self, fd: int, abi: int, handled: dict[str, int], skipped: tuple[str, ...]) -> None:
        self._fd = fd
        self.abi = abi
        self.handled = handled  # {"fs": rights mask, "net": mask, "scoped": mask}
        self.skipped = skipped  # policy paths that did not exist

    def enforce(self) -> None:
        """Restrict this thread and its future children to the ruleset (irreversible), then close it."""
        if self._fd < 0:
            raise _fail("landlock_restrict_self: the ruleset is already enforced or closed", errno.EBADF)
        one, zero = ctypes.c_ulong(1), ctypes.c_ulong(0)
        if _libc.prctl(PR_SET_NO_NEW_PRIVS, one, zero, zero, zero) != 0:  # required without CAP_SYS_ADMIN
            raise _fail("prctl(PR_SET_NO_NEW_PRIVS)", ctypes.get_errno())
        result, err = _syscall(SYS_RESTRICT_SELF, self._fd, 0)
        if result != 0:
            raise _fail("landlock_restrict_self", err)
        self.close()

    def close(self) -> None:
        """Close the ruleset without enforcing it (idempotent)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass


def prepare(policy: Policy, abi: int | None = None) -> Prepared:
    """Build the ruleset for `policy` at ABI `abi` (default: the highest offered), without enforcing it.

    Every filesystem right the ABI knows is handled, so only the listed paths get any; each existing
    path gets a path-beneath rule (directory rights masked off for non-directories), missing paths are
    skipped and listed in `Prepared.skipped`.
    """
    offered = _probe_abi()[0]
    if offered < 1:
        raise LandlockError(errno.EOPNOTSUPP, f"landlock unavailable: {unavailable_reason()}")
    version = offered if abi is None else abi
    if not 1 <= version <= offered:
        raise _fail(
            f"landlock_create_ruleset: ABI {version} asked, the kernel offers 1..{offered}", errno.EINVAL
        )
    handled_fs = fs_rights(version)
    net = NET_BIND_TCP | NET_CONNECT_TCP if policy.deny_tcp and version >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if policy.scope and version >= 6 else 0
    attr = _RulesetAttr(handled_fs, net, scoped)
    size = 24 if version >= 6 else 16 if version >= 4 else 8  # the struct as the ABI knows it
    fd, err = _syscall(SYS_CREATE_RULESET, ctypes.c_void_p(ctypes.addressof(attr)), size, 0)
    if fd < 0:
        raise _fail(f"landlock_create_ruleset (ABI {version})", err)
    prepared = Prepared(fd, version, {"fs": handled_fs, "net": net, "scoped": scoped}, ())
    skipped: list[str] = []
    try:
        for paths, rights in (
            (policy.read_exec, READ_EXEC),
            (policy.read_write, handled_fs),
            (policy.devices, DEVICE),
        ):
            for path in paths:
                if not _add_path_rule(fd, path, rights & handled_fs):
                    skipped.append(path)
    except BaseException:
        prepared.close()
        raise
    prepared.skipped = tuple(skipped)
    return prepared


def _add_path_rule(ruleset_fd: int, path: str, rights: int) -> bool:
    """Allow `rights` beneath `path`; False when the path does not exist."""
    try:
        path_fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _fail(f"open({path}, O_PATH)", exc.errno or errno.EIO) from None
    try:
        if not stat.S_ISDIR(os.fstat(path_fd).st_mode):
            rights &= FILE_RIGHTS
        if rights == 0:
            return True  # nothing this ABI can grant here (the kernel refuses an empty rule)
        attr = _PathBeneathAttr(rights, path_fd)
        result, err = _syscall(
            SYS_ADD_RULE, ruleset_fd, RULE_PATH_BENEATH, ctypes.c_void_p(ctypes.addressof(attr)), 0
        )
        if result != 0:
            raise _fail(f"landlock_add_rule({path})", err)
    finally:
        os.close(path_fd)
    return True


SYSTEM_PATHS = (
    "/usr",
    "/bin",
    "/sbin",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
)
# never listed as a whole (nor $HOME and its ancestors); a Python install below them is listed by itself
_NEVER = ("/proc", "/sys", "/dev", "/tmp", "/etc", "/root", "/home", "/run", "/var")


def python_paths() -> tuple[str, ...]:
    """What a worker of this Python needs to read and execute, for `Policy.read_exec`.

    The interpreter's prefixes and directory, every existing sys.path entry (a zip file as a file), the
    loader's directories and all of /usr, /lib*, /bin, /sbin (zoneinfo, locale, shared libraries), and
    the loader's files in /etc. Real paths (Landlock judges the file a symlink leads to), a path dropped
    when an ancestor is listed; never /, $HOME or its ancestors, /tmp, /proc, /etc or the like as a whole
    (the parts of a Python install under $HOME are listed, the home itself is not).
    """
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    if sys.executable:
        candidates += [os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))]
    candidates += [entry for entry in sys.path if entry]  # "" is the working directory, not Python
    candidates += SYSTEM_PATHS
    candidates += sorted(f"/{name}" for name in _listdir("/") if name.startswith("lib"))
    home = os.path.realpath(os.path.expanduser("~"))
    refused = {"/", *_NEVER, *_ancestors(home)}
    real: list[str] = []
    for path in candidates:
        resolved = os.path.realpath(path)
        if resolved in refused or not os.path.exists(resolved) or resolved in real:
            continue
        real.append(resolved)
    kept: list[str] = []
    for path in sorted(real):
        if not any(path.startswith(parent.rstrip("/") + "/") for parent in kept):
            kept.append(path)
    return tuple(kept)


def _ancestors(path: str) -> list[str]:
    out = [path]
    while path != os.path.dirname(path):
        path = os.path.dirname(path)
        out.append(path)
    return out


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
