"""A small seccomp-bpf binding to libseccomp (ctypes; standard library only) and the filter for workers.

The second isolation layer (for containers, where user namespaces are refused) refuses the system
calls that model code has no use for and that widen the kernel surface or escape Landlock: sockets,
ptrace, mounts, namespaces, bpf/perf/io_uring/keyrings, kernel modules, and the file-metadata calls
Landlock does not govern (chmod, chown, utime, xattrs, path truncate, file handles).

libseccomp is required for this layer (it turns rules into BPF for the native architecture and knows
the system call numbers). Where it is missing (Alpine without `libseccomp`, distroless images) or the
kernel refuses filters, `unavailable_reason()` says why in one clause and the layer refuses with it.

Use: a `Filter` is BUILT once in the zygote, before fork (`worker_filter()` builds and compiles it to
BPF: plain C memory and one Python bytes object, both fine across fork), and LOADED in each forked
worker with `load()`, which makes no libseccomp call: it sets no_new_privs and hands the compiled
program to the kernel with prctl(PR_SET_SECCOMP). The filter binds the calling thread only.

Architecture: a filter covers the native architecture only; calls made through another entry point
(i386 `int 0x80`, x32 numbers with bit 30 set on x86_64) kill the process (SCMP_FLTATR_ACT_BADARCH).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from typing import NamedTuple

SONAME = "libseccomp.so.2"
SCMP_ACT_KILL_PROCESS = 0x80000000
SCMP_ACT_KILL_THREAD = 0x00000000
SCMP_ACT_TRAP = 0x00030000
SCMP_ACT_LOG = 0x7FFC0000
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_FLTATR_ACT_BADARCH = 2
SCMP_CMP_NE, SCMP_CMP_MASKED_EQ = 1, 7
PR_GET_SECCOMP, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 21, 22, 38
SECCOMP_MODE_FILTER = 2

CLONE_NEWTIME = 0x00000080  # overlaps the exit-signal byte of clone(); only unshare/clone3 take it
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEW_FLAGS = (
    CLONE_NEWNS,
    CLONE_NEWCGROUP,
    CLONE_NEWUTS,
    CLONE_NEWIPC,
    CLONE_NEWUSER,
    CLONE_NEWPID,
    CLONE_NEWNET,
    CLONE_NEWTIME,
)

# System calls newer than libseccomp 2.5 knows; numbers from 424 on are the same on every architecture
# rlmx supports (x86_64, aarch64), so they are added by number when the resolver does not know them.
_UNIFIED_NUMBERS = {"setxattrat": 463, "removexattrat": 466, "open_tree_attr": 467, "file_setattr": 469}
_UNIFIED_ARCHES = ("x86_64", "aarch64")

_ACTIONS = {
    "allow": SCMP_ACT_ALLOW,
    "kill": SCMP_ACT_KILL_PROCESS,
    "trap": SCMP_ACT_TRAP,
    "log": SCMP_ACT_LOG,
}


def scmp_act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class SeccompUnavailable(OSError):
    """libseccomp or the kernel's seccomp filters cannot be used here."""


class SeccompError(OSError):
    """libseccomp or the kernel refused one step of building or loading a filter."""


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


_libc = ctypes.CDLL(None, use_errno=True)
_lib: ctypes.CDLL | None = None
_lib_error: str | None = None
_reason: list[str | None] = []  # the cached answer of unavailable_reason()


def _load_library() -> ctypes.CDLL | None:
    """libseccomp, loaded once per process (None when it cannot be loaded; `_lib_error` says why)."""
    global _lib, _lib_error
    if _lib is not None or _lib_error is not None:
        return _lib
    name = ctypes.util.find_library("seccomp") or SONAME
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        _lib_error = str(exc) or f"{name} not found"
        return None
    void_p, u32, c_int, char_p = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_char_p
    signatures: dict[str, tuple[list[object], object]] = {
        "seccomp_init": ([u32], void_p),
        "seccomp_release": ([void_p], None),
        "seccomp_attr_set": ([void_p, c_int, u32], c_int),
        "seccomp_arch_native": ([], u32),
        "seccomp_arch_resolve_name": ([char_p], u32),
        "seccomp_syscall_resolve_name_arch": ([u32, char_p], c_int),
        "seccomp_rule_add_array": ([void_p, u32, c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp)], c_int),
        "seccomp_export_bpf": ([void_p, c_int], c_int),
    }
    for func, (argtypes, restype) in signatures.items():
        fn = getattr(lib, func, None)
        if fn is None:
            _lib_error = f"{name} lacks {func} (libseccomp 2.2 or newer is needed)"
            return None
        fn.argtypes = argtypes
        fn.restype = restype
    _lib = lib
    return lib


def _library() -> ctypes.CDLL:
    lib = _load_library()
    if lib is None:
        raise SeccompUnavailable(errno.ENOENT, _library_reason())
    return lib


def _library_reason() -> str:
    detail = _lib_error or f"{SONAME} not found"
    if "No such file" in detail or "not found" in detail:
        return f"libseccomp is not installed ({detail}; Alpine: apk add libseccomp, Debian: apt install libseccomp2)"
    return f"libseccomp cannot be used ({detail})"


def _prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    zero = ctypes.c_ulong(0)
    return int(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), zero, zero))


def unavailable_reason() -> str | None:
    """None when this process can build and load seccomp filters; else one short clause saying why not.

    Checks, cached for the process: libseccomp loads; the kernel has seccomp (PR_GET_SECCOMP); and it
    would take a filter from this process: prctl(PR_SET_SECCOMP, FILTER, NULL) fails with EFAULT (the
    program pointer is read first) where filters can be installed, and with another errno where the
    kernel lacks filter mode (EINVAL) or a filter already in force refuses it (as Docker-like runtimes
    may). No filter is installed by the check."""
    if _reason:
        return _reason[0]
    reason: str | None = None
    if _load_library() is None:
        reason = _library_reason()
    elif _prctl(PR_GET_SECCOMP) < 0:
        code = ctypes.get_errno()
        reason = (
            f"the kernel has no seccomp filters (prctl PR_GET_SECCOMP: {errno.errorcode.get(code, code)})"
        )
    elif _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, 0) < 0 and ctypes.get_errno() != errno.EFAULT:
        code = ctypes.get_errno()
        name = errno.errorcode.get(code, str(code))
        reason = f"seccomp filters are refused to this process (prctl PR_SET_SECCOMP: {name})"
    _reason.append(reason)
    return reason


def native_arch() -> str:
    """The machine name the filters are built for ("x86_64", "aarch64", ...)."""
    return os.uname().machine


def resolve(name: str, arch: str | None = None) -> int | None:
    """The number of system call `name` on `arch` (a libseccomp arch name; None: native), or None when
    it does not exist there or libseccomp does not know it."""
    lib = _library()
    arch_name = arch or native_arch()
    token = lib.seccomp_arch_native() if arch is None else lib.seccomp_arch_resolve_name(arch.encode())
    if token == 0:
        raise SeccompError(errno.EINVAL, f"libseccomp does not know the architecture {arch}")
    number = int(lib.seccomp_syscall_resolve_name_arch(token, name.encode()))
    if number < 0 and name in _UNIFIED_NUMBERS and arch_name in _UNIFIED_ARCHES:
        number = _UNIFIED_NUMBERS[name]
    return number if number >= 0 else None


class Filter:
    """A seccomp filter for the native architecture: `default` action ("allow", "kill", "trap" or
    "log") for every call no rule names; calls from another architecture's entry point kill the
    process. Add rules with `deny`, then `load()` (in the process to confine) and `release()`."""

    def __init__(self, default: str = "allow") -> None:
        if default not in _ACTIONS:
            raise ValueError(f"unknown default action {default!r}; one of {', '.join(_ACTIONS)}")
        self._lib = _library()
        self._ctx: int | None = self._lib.seccomp_init(_ACTIONS[default])
        if not self._ctx:
            raise SeccompError(errno.ENOMEM, "seccomp_init failed")
        self._call("seccomp_attr_set", self._ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)
        self.default = default
        self.skipped: list[str] = []  # names this architecture (or this libseccomp) does not have
        self.rules: list[tuple[str, int, str]] = []  # (name, errno, condition) of every rule added
        self._program: bytes | None = None
        self._buffer: ctypes.Array[ctypes.c_char] | None = None
        self._fprog: _SockFprog | None = None

    def _call(self, func: str, *args: object) -> int:
        rc = int(getattr(self._lib, func)(*args))
        if rc < 0:
            raise SeccompError(-rc, f"{func}: {os.strerror(-rc)}")
        return rc

    def deny(
        self,
        name: str,
        code: int,
        *,
        arg0_masked: tuple[int, int] | None = None,
        arg0_ne: int | None = None,
    ) -> bool:
        """Make system call `name` fail with errno `code` -- always, or only when its first argument
        matches: `arg0_masked=(mask, value)` (arg0 & mask == value) or `arg0_ne=value` (arg0 != value).
        Rules for one call are alternatives (any matching one applies). Returns False (and records the
        name in `skipped`) when the native architecture has no such call."""
        if self._ctx is None:
            raise SeccompError(errno.EINVAL, "the filter was released")
        number = resolve(name)
        if number is None:
            self.skipped.append(name)
            return False
        condition = "always"
        compare: ctypes.Array[_ArgCmp] | None = None
        if arg0_masked is not None:
            mask, value = arg0_masked
            compare = (_ArgCmp * 1)(_ArgCmp(0, SCMP_CMP_MASKED_EQ, mask, value))
            condition = f"arg0 & {mask:#x} == {value:#x}"
        elif arg0_ne is not None:
            compare = (_ArgCmp * 1)(_ArgCmp(0, SCMP_CMP_NE, arg0_ne, 0))
            condition = f"arg0 != {arg0_ne:#x}"
        self._call(
            "seccomp_rule_add_array", self._ctx, scmp_act_errno(code), number, 1 if compare else 0, compare
        )
        self.rules.append((name, code, condition))
        self._program = None
        return True

    def export_bpf(self) -> bytes:
        """The filter compiled to classic BPF (struct sock_filter entries, native byte order); cached
        until the next rule, and what `load()` hands the kernel."""
        if self._program is not None:
            return self._program
        if self._ctx is None:
            raise SeccompError(errno.EINVAL, "the filter was released")
        fd = os.memfd_create("rlmx-seccomp", os.MFD_CLOEXEC)
        try:
            self._call("seccomp_export_bpf", self._ctx, fd)
            size = os.lseek(fd, 0, os.SEEK_END)
            program = os.pread(fd, size, 0)
        finally:
            os.close(fd)
        self._buffer = ctypes.create_string_buffer(program, len(program))
        self._fprog = _SockFprog(len(program) // 8, ctypes.addressof(self._buffer))
        self._program = program
        return program

    def load(self) -> None:
        """Confine the calling thread (and the processes it starts) with this filter, for good. Sets
        no_new_privs first (the kernel takes a filter from a process without CAP_SYS_ADMIN only then).
        When the filter was compiled before (`export_bpf`, as `worker_filter()` does), no libseccomp
        code and no allocation runs here."""
        self.export_bpf()
        assert self._fprog is not None
        if _prctl(PR_SET_NO_NEW_PRIVS, 1) < 0:
            code = ctypes.get_errno()
            raise SeccompError(code, f"prctl PR_SET_NO_NEW_PRIVS: {os.strerror(code)}")
        if _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(self._fprog)) < 0:
            code = ctypes.get_errno()
            raise SeccompError(
                code, f"cannot load the seccomp filter (prctl PR_SET_SECCOMP: {os.strerror(code)})"
            )

    def release(self) -> None:
        """Free libseccomp's context (a compiled program stays loadable)."""
        if self._ctx is not None:
            self._lib.seccomp_release(self._ctx)
            self._ctx = None

    def __enter__(self) -> Filter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Rule(NamedTuple):
    name: str
    errno: int
    arg0_masked: tuple[int, int] | None = None
    arg0_ne: int | None = None


def _all(code: int, *names: str) -> tuple[Rule, ...]:
    return tuple(Rule(name, code) for name in names)


EPERM, ENOSYS = errno.EPERM, errno.ENOSYS

WORKER_POLICY: tuple[Rule, ...] = (
    # no network and no local sockets: socket() for every family (AF_UNIX too); socketpair stays
    *_all(EPERM, "socket"),
    # other processes' memory
    *_all(EPERM, "ptrace", "process_vm_readv", "process_vm_writev"),
    # mounts, old and new API
    *_all(EPERM, "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick"),
    *_all(EPERM, "move_mount", "open_tree", "open_tree_attr", "mount_setattr"),
    # namespaces: unshare/setns always, clone with any CLONE_NEW* flag (arg0 is flags on x86_64 and
    # aarch64); clone3 keeps its flags in memory a filter cannot read: ENOSYS makes glibc use clone
    *_all(EPERM, "unshare", "setns"),
    *(Rule("clone", EPERM, arg0_masked=(flag, flag)) for flag in CLONE_NEW_FLAGS),
    *_all(ENOSYS, "clone3"),
    # kernel surface model code has no use for: BPF, perf, keyrings, userfaultfd, io_uring, modules
    *_all(EPERM, "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd"),
    *_all(EPERM, "io_uring_setup", "io_uring_enter", "io_uring_register"),
    *_all(EPERM, "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module"),
    # file metadata, which Landlock does not govern: modes, owners, times, xattrs, path truncate
    # (ftruncate stays), file handles (open_by_handle_at reaches files by inode, past any path rule)
    *_all(EPERM, "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat"),
    *_all(EPERM, "utime", "utimes", "futimesat", "utimensat", "file_setattr"),
    *_all(EPERM, "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr"),
    *_all(EPERM, "setxattrat", "removexattrat", "truncate", "name_to_handle_at", "open_by_handle_at"),
    # host administration (mostly capability-checked anyway; refused before the kernel looks)
    *_all(EPERM, "fanotify_init", "swapon", "swapoff", "reboot", "acct", "quotactl", "settimeofday"),
    *_all(EPERM, "clock_settime", "syslog", "vhangup", "iopl", "ioperm", "lookup_dcookie"),
    # personality: only PER_LINUX (0); other values could turn off ASLR (ADDR_NO_RANDOMIZE) or make
    # reads executable for exec'd programs. The query (0xffffffff) is refused too: nothing rlmx runs
    # needs it. (`seccomp` and `prctl` stay allowed: stacking more filters only narrows further.)
    Rule("personality", EPERM, arg0_ne=0),
)


def build(policy: tuple[Rule, ...] | list[Rule], default: str = "allow") -> Filter:
    """A compiled `Filter` holding `policy`'s rules (names this architecture lacks are skipped)."""
    flt = Filter(default)
    for rule in policy:
        flt.deny(rule.name, rule.errno, arg0_masked=rule.arg0_masked, arg0_ne=rule.arg0_ne)
    flt.export_bpf()
    return flt


def worker_filter() -> Filter:
    """The filter for model code (`WORKER_POLICY`), built and compiled: load it in each worker."""
    return build(WORKER_POLICY)
