"""The isolation layer without namespaces: Landlock + seccomp + a uid of its own per worker.

For hosts where no user namespace can be made: containers (Docker's default profile, Kubernetes
`RuntimeDefault`), hosts that forbid unprivileged user namespaces. Used by the zygote
(`rlmx.sandbox.zygote`), never by the host process. Per worker, after the zygote forks:

    Z, the zygote (loaded the context; not confined)
      -> M, the worker's monitor: a child subreaper, unconfined, never runs model code. It reaps what
         the worker leaves behind, checks the scratch directory's size, and when the worker ends kills
         everything that is left (the processes of the worker's uid, of its session, and every one it
         adopted, found in /proc), then removes the scratch directory.
           -> C, the worker: its own uid (started as root), rlimits, a Landlock domain of its own
              (read/execute only what this Python needs, read-write only its scratch, no TCP, abstract
              unix sockets and signals scoped), then the seccomp filter; then it serves the host.

The host holds a pidfd of C: killing C ends the worker, and M sweeps the rest. Scratch directories
and uid locks live in `<tmp>/rlmx-confine-<euid>/`; a lock held by a monitor marks its directory as
in use, so a directory whose lock is free was left by a host that was killed, and is swept (its uid's
processes killed, its files removed) by the next zygote that starts.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import random
import shutil
import signal
import stat
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rlmx.sandbox import isolation, landlock, seccomp

CAP_DAC_OVERRIDE = 1
CAP_SETUID, CAP_SETGID, CAP_SETPCAP = 7, 6, 8
PR_SET_KEEPCAPS, PR_SET_CHILD_SUBREAPER = 8, 36
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
LOWEST_ABI_SHARED_UID = 6  # without a uid per worker, signals must be scoped by Landlock itself


class Unavailable(OSError):
    """This layer cannot be built here; the message says what is missing."""


@dataclass
class Plan:
    """What the zygote found it can do, once, before it forks any worker."""

    abi: int
    filter: seccomp.Filter
    paths: tuple[str, ...]  # read/execute for every worker
    per_worker_uid: bool
    keep_read_bypass: bool  # this Python is not readable by other uids: keep CAP_DAC_OVERRIDE
    uid_first: int
    uid_count: int
    state_dir: str
    notes: list[str] = field(default_factory=list)


def _has(caps: int, cap: int) -> bool:
    return bool(caps >> cap & 1)


def can_switch_uid() -> bool:
    """Root with CAP_SETUID, CAP_SETGID and CAP_SETPCAP: each worker can get a uid of its own."""
    caps = isolation.capability_set()
    return os.geteuid() == 0 and all(_has(caps, c) for c in (CAP_SETUID, CAP_SETGID, CAP_SETPCAP))


def readable_by_others(path: str) -> bool:
    """Whether a uid with no rights of its own can reach `path` (every ancestor searchable by others,
    the path itself readable)."""
    try:
        real = os.path.realpath(path)
        parts = real.split(os.sep)
        for i in range(2, len(parts)):
            if not os.stat(os.sep.join(parts[:i]) or "/").st_mode & stat.S_IXOTH:
                return False
        mode = os.stat(real).st_mode
    except OSError:
        return True  # a path that is not there asks for nothing
    return bool(mode & stat.S_IROTH) and (not stat.S_ISDIR(mode) or bool(mode & stat.S_IXOTH))


def python_private_paths() -> list[str]:
    """The parts of this Python (and rlmx) that a worker uid must read."""
    found = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    found += [p for p in sys.path if p and os.path.isdir(p)]
    return found


@functools.lru_cache(maxsize=1)
def python_readable_by_others() -> bool:
    """Whether another uid can read this Python and rlmx (looked at once per process)."""
    return all(readable_by_others(p) for p in python_private_paths())


def why_not(*, explicit: bool) -> str | None:
    """Why this layer cannot run here (None: it can). `explicit`: it was asked for by name, so a
    shared uid is accepted at any Landlock ABI."""
    reasons = []
    ll = landlock.unavailable_reason()
    if ll is not None:
        reasons.append(f"no Landlock ({ll})")
    sc = seccomp.unavailable_reason()
    if sc is not None:
        reasons.append(f"no seccomp ({sc})")
    if reasons:
        return "; ".join(reasons)
    if not can_switch_uid():
        if not explicit and landlock.abi() < LOWEST_ABI_SHARED_UID:
            who = "not root" if os.geteuid() != 0 else "CAP_SETUID was dropped"
            return (
                f"no Landlock layer: workers cannot get a uid of their own ({who}) and Landlock ABI {landlock.abi()} cannot "
                f"scope signals (needs ABI >= {LOWEST_ABI_SHARED_UID}, Linux >= 6.12)"
            )
        return None
    if not python_readable_by_others():
        if not _has(isolation.capability_set(), CAP_DAC_OVERRIDE):
            return (
                f"no Landlock layer: this Python ({sys.prefix}) is not readable by other users and CAP_DAC_OVERRIDE is not "
                "available; install rlmx in a Python other users can read"
            )
    return None


def make_plan(*, explicit: bool, uid_first: int, uid_count: int, tmp_base: str) -> Plan:
    reason = why_not(explicit=explicit)
    if reason is not None:
        raise Unavailable(errno.EPERM, reason)
    per_worker_uid = can_switch_uid()
    keep_bypass = per_worker_uid and not python_readable_by_others()
    notes = []
    if not per_worker_uid:
        notes.append("workers share this user's uid (not root): Landlock scopes their signals")
    if keep_bypass:
        notes.append("workers keep CAP_DAC_OVERRIDE: this Python is not readable by other users")
    state_dir = _state_dir(tmp_base)
    try:
        flt = seccomp.worker_filter()
    except OSError as exc:
        raise Unavailable(exc.errno or errno.EPERM, f"no seccomp ({exc})") from exc
    plan = Plan(
        abi=landlock.abi(),
        filter=flt,
        paths=landlock.python_paths(),
        per_worker_uid=per_worker_uid,
        keep_read_bypass=keep_bypass,
        uid_first=uid_first,
        uid_count=uid_count,
        state_dir=state_dir,
        notes=notes,
    )
    sweep_stale(plan)
    return plan


def _state_dir(tmp_base: str) -> str:
    """`<tmp>/rlmx-confine-<euid>`: 0711 (workers may pass through to their own scratch, not list it),
    owned by this user; anything else there is refused."""
    path = os.path.join(tmp_base, f"rlmx-confine-{os.geteuid()}")
    try:
        os.mkdir(path, 0o711)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise Unavailable(errno.EPERM, f"{path} is not a directory owned by this user alone; remove it")
    os.chmod(path, 0o711)
    return path


# --- scratch directories and uids -------------------------------------------------------------------


@dataclass
class Slot:
    """A worker's uid (None: it keeps this user's) and scratch directory, held by an flock on `lock_fd`."""

    uid: int | None
    scratch: str
    lock_fd: int


def _try_lock(path: str) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def acquire_slot(plan: Plan) -> Slot:
    """A free uid from the range (root) and a fresh 0700 scratch directory owned by it."""
    if plan.per_worker_uid:
        for i in range(plan.uid_count):  # the lowest free one: few lock files, whatever the range
            uid = plan.uid_first + i
            base = os.path.join(plan.state_dir, f"u{uid}")
            fd = _try_lock(base + ".lock")
            if fd is None:
                continue
            if os.path.lexists(base):  # left by a host that was killed
                kill_uid(uid)
                shutil.rmtree(base, ignore_errors=True)
            os.mkdir(base, 0o700)
            os.chown(base, uid, uid)
            return Slot(uid, base, fd)
        raise Unavailable(errno.EAGAIN, f"every uid of {plan.uid_first}..+{plan.uid_count} is in use")
    while True:
        base = os.path.join(plan.state_dir, f"w{os.getpid()}-{random.randrange(1 << 30):x}")
        fd = _try_lock(base + ".lock")
        if fd is not None and not os.path.lexists(base):
            os.mkdir(base, 0o700)
            return Slot(None, base, fd)
        if fd is not None:
            os.close(fd)


def release_slot(slot: Slot) -> None:
    """After the worker's end, with its scratch removed: a slot named for one worker (no uid of its own)
    takes its lock file with it, so they do not pile up; a uid's lock file stays for the next worker."""
    if slot.uid is None:
        with contextlib.suppress(OSError):
            os.unlink(slot.scratch + ".lock")  # still held by the caller: nobody else takes this name


def sweep_stale(plan: Plan) -> int:
    """Remove what killed hosts left (directories whose lock nobody holds); returns how many."""
    swept = 0
    try:
        names = os.listdir(plan.state_dir)
    except OSError:
        return 0
    for name in names:
        if not name.endswith(".lock"):
            continue
        base = os.path.join(plan.state_dir, name[: -len(".lock")])
        orphan = not os.path.lexists(base)  # a worker's lock file left by an older rlmx, or a kill
        if orphan and not name.startswith("w"):
            continue
        fd = _try_lock(base + ".lock")
        if fd is None:
            continue  # in use
        if orphan:
            with contextlib.suppress(OSError):
                os.unlink(base + ".lock")
            os.close(fd)
            continue
        try:
            uid_text = os.path.basename(base)[1:]
            if base.rsplit("/", 1)[-1].startswith("u") and plan.per_worker_uid and uid_text.isdigit():
                kill_uid(int(uid_text))
            shutil.rmtree(base, ignore_errors=True)
            swept += 1
        finally:
            os.close(fd)
    return swept


def kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid` (never 0): a child takes the uid and calls kill(-1) until none is
    left; a fork bomb cannot outrun it (its processes die faster than they fork)."""
    if uid <= 0:
        raise ValueError("never uid 0")
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            for _ in range(1000):
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    break
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


# --- the worker -------------------------------------------------------------------------------------


def confine_worker(plan: Plan, slot: Slot, *, nproc: int, apply_limits: Callable[[int], None]) -> None:
    """In C, just before it serves: its uid, limits, Landlock domain and seccomp filter, in that order.
    `apply_limits(nproc)` sets the rlimits (RLIMIT_NPROC to `nproc`), while this process may still
    raise them."""
    policy = landlock.Policy(
        read_exec=plan.paths,
        read_write=(slot.scratch,),
        devices=DEVICES,
        deny_tcp=True,
        scope=True,
    )
    prepared = landlock.prepare(policy, plan.abi)  # paths opened now, before the uid changes
    if slot.uid is None:
        apply_limits(nproc + processes_of(os.getuid()))
        drop_capabilities()
    else:
        apply_limits(nproc)
        become(slot.uid, keep=(CAP_DAC_OVERRIDE,) if plan.keep_read_bypass else ())
    isolation.set_parent_death_signal()  # a change of uid cleared it: the worker dies with its monitor
    prepared.enforce()
    plan.filter.load()


def drop_capabilities() -> None:
    """Keep this uid, hold no capability: the bounding set and securebits are cut where this process
    may (CAP_SETPCAP: root without CAP_SETUID); an ordinary user has none to drop, and `no_new_privs`
    keeps it that way (setuid programs and file capabilities grant nothing)."""
    if _has(isolation.capability_set(), CAP_SETPCAP):
        isolation.drop_privileges(None)
        return
    isolation.prctl(isolation.PR_CAP_AMBIENT, isolation.PR_CAP_AMBIENT_CLEAR_ALL)
    isolation.clear_capabilities()
    isolation.prctl(isolation.PR_SET_NO_NEW_PRIVS, 1)


def processes_of(uid: int) -> int:
    """How many processes `uid` has now: a shared uid's RLIMIT_NPROC counts them all."""
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                count += os.stat(f"/proc/{name}").st_uid == uid
            except OSError:
                pass
    return count


def become(uid: int, keep: Sequence[int] = ()) -> None:
    """From root to `uid` (and gid `uid`) for good, holding only the capabilities in `keep`: the
    bounding set is cut to them, no ambient set, `SECBIT_NOROOT` locked, `no_new_privs` set."""
    if uid <= 0:
        raise ValueError("a worker never runs as uid 0")
    for cap in range(isolation.last_capability() + 1):
        if cap in keep:
            continue
        try:
            isolation.prctl(isolation.PR_CAPBSET_DROP, cap)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    isolation.prctl(isolation.PR_CAP_AMBIENT, isolation.PR_CAP_AMBIENT_CLEAR_ALL)
    isolation.prctl(isolation.PR_SET_SECUREBITS, isolation.SECBIT_NOROOT | isolation.SECBIT_NOROOT_LOCKED)
    if keep:
        isolation.prctl(PR_SET_KEEPCAPS, 1)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    isolation.set_capabilities(sum(1 << cap for cap in keep))
    isolation.prctl(isolation.PR_SET_NO_NEW_PRIVS, 1)
