"""Make any Linux host look like a container to one command, with the real kernel features (no mocks).

    python -m rlmx.testing.container [options] -- COMMAND ARGS...

Run as root, it sets up what Docker's default profile gives a container's root, then execs COMMAND:

- capabilities: the bounding set cut to Docker's default 14 (`DOCKER_CAPABILITIES`), the ambient set
  cleared, effective and permitted set to those 14 and inheritable emptied (as Docker does since
  20.10.14), so after execve root holds exactly those 14;
- a seccomp filter like Docker's for namespaces: unshare, setns and clone with a CLONE_NEW* flag fail
  with EPERM, clone3 with ENOSYS (glibc then falls back to clone), mount/umount2/pivot_root with EPERM
  (Docker allows those only with CAP_SYS_ADMIN, which is gone anyway). The filter kills calls made
  through another architecture's entry point (i386, x32), which Docker allows;
- no_new_privs, which the kernel needs to take the filter from a process without CAP_SYS_ADMIN (Docker
  sets it only with `--security-opt no-new-privileges`; here COMMAND always runs with it).

Options, for the hosts rlmx must cope with:

- `--no-landlock=enosys|eperm`: the Landlock calls fail with ENOSYS (a kernel without Landlock) or
  EPERM (a runtime whose profile refuses them);
- `--no-seccomp`: COMMAND cannot install seccomp filters (`seccomp` -> ENOSYS, prctl(PR_SET_SECCOMP)
  -> EINVAL), as under a runtime that refuses nested filters;
- `--no-libseccomp`: libseccomp is gone for COMMAND, as on Alpine or distroless: in a private mount
  namespace every libseccomp.so* the dynamic loader would find is hidden by an overlay whiteout (the
  launcher loads libseccomp and compiles its own filter first);
- `--no-userns`: COMMAND runs as root of a user namespace (ids 0-65535 mapped to themselves) whose
  user.max_user_namespaces is 0, so the kernel itself refuses new user namespaces (ENOSPC), not only
  the filter (EPERM); with `--no-namespace-filter` the kernel's answer is the one COMMAND sees;
- `--no-namespace-filter`: leave namespaces and mounts to the kernel (no Docker-like rules);
- `--user NAME|UID`: run COMMAND as that user (its passwd group, or gid = uid; no supplementary
  groups): its capabilities go with uid 0, the bounding set stays Docker's;
- `--print`: one JSON line on stderr with what was applied, before the exec.

Exit status: 2 with one line on stderr when not root or a step fails; 127 when COMMAND cannot be run.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import glob
import json
import os
import pwd
import subprocess
import sys
import tempfile

from rlmx.sandbox import isolation
from rlmx.sandbox.seccomp import CLONE_NEW_FLAGS, PR_SET_SECCOMP, Filter, Rule, build

PROG = "rlmx.testing.container"

# Docker's default capability set (moby's oci/caps defaults), name -> number
DOCKER_CAPABILITIES: dict[str, int] = {
    "CHOWN": 0,
    "DAC_OVERRIDE": 1,
    "FSETID": 4,
    "FOWNER": 3,
    "MKNOD": 27,
    "NET_RAW": 13,
    "SETGID": 6,
    "SETUID": 7,
    "SETFCAP": 31,
    "SETPCAP": 8,
    "NET_BIND_SERVICE": 10,
    "SYS_CHROOT": 18,
    "KILL": 5,
    "AUDIT_WRITE": 29,
}
DOCKER_CAPABILITY_MASK = sum(1 << number for number in DOCKER_CAPABILITIES.values())  # 0xa80425fb

EPERM, ENOSYS, EINVAL = errno.EPERM, errno.ENOSYS, errno.EINVAL

# Docker's default profile, for what rlmx meets: namespaces and mounts (Docker: allowed only with
# CAP_SYS_ADMIN, which its containers lack)
NAMESPACE_POLICY: tuple[Rule, ...] = (
    Rule("unshare", EPERM),
    Rule("setns", EPERM),
    *(Rule("clone", EPERM, arg0_masked=(flag, flag)) for flag in CLONE_NEW_FLAGS),
    Rule("clone3", ENOSYS),
    Rule("mount", EPERM),
    Rule("umount2", EPERM),
    Rule("pivot_root", EPERM),
)
LANDLOCK_CALLS = ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self")
NO_SECCOMP_POLICY: tuple[Rule, ...] = (
    Rule("seccomp", ENOSYS),
    Rule("prctl", EINVAL, arg0_masked=(0xFFFFFFFF, PR_SET_SECCOMP)),
)
USERNS_IDS = 65536  # ids 0..65535 map to themselves in the --no-userns user namespace

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """One step of the setup failed (the message is the whole line)."""


def policy(args: argparse.Namespace) -> list[Rule]:
    rules: list[Rule] = [] if args.no_namespace_filter else list(NAMESPACE_POLICY)
    if args.no_landlock:
        code = ENOSYS if args.no_landlock == "enosys" else EPERM
        rules += [Rule(name, code) for name in LANDLOCK_CALLS]
    if args.no_seccomp:
        rules += NO_SECCOMP_POLICY
    return rules


def libseccomp_files() -> dict[str, list[str]]:
    """Every libseccomp.so* the dynamic loader could find: real directory -> file names in it."""
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += ["/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib"]
    multiarch = f"{os.uname().machine}-linux-gnu"
    dirs += [f"/lib/{multiarch}", f"/usr/lib/{multiarch}"]
    for conf in ["/etc/ld.so.conf", *sorted(glob.glob("/etc/ld.so.conf.d/*.conf"))]:
        try:
            with open(conf) as fh:
                dirs += [line.strip() for line in fh if line.strip().startswith("/")]
        except OSError:
            continue
    try:
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False).stdout
    except OSError:
        cache = ""
    dirs += [
        os.path.dirname(line.split("=>")[-1].strip()) for line in cache.splitlines() if "libseccomp" in line
    ]
    found: dict[str, list[str]] = {}
    for directory in dirs:
        real = os.path.realpath(directory)
        for path in sorted(glob.glob(os.path.join(real, "libseccomp.so*"))):
            names = found.setdefault(real, [])
            if os.path.basename(path) not in names:
                names.append(os.path.basename(path))
    return found


def hide_libseccomp() -> list[str]:
    """In a new private mount namespace, an overlay over each directory holding libseccomp.so* with a
    whiteout for each such file: they are absent (ENOENT) for every later open, dlopen included. The
    overlays' upper layer is a tmpfs detached after mounting (nothing is left on the host)."""
    found = libseccomp_files()
    isolation.unshare(isolation.CLONE_NEWNS)
    isolation.mount("none", "/", None, isolation.MS_REC | isolation.MS_PRIVATE)
    scratch = tempfile.mkdtemp(prefix="rlmx-hide-")
    hidden: list[str] = []
    try:
        isolation.mount("tmpfs", scratch, "tmpfs", 0, "mode=0700")
        for index, (directory, names) in enumerate(sorted(found.items())):
            upper, work = f"{scratch}/{index}/upper", f"{scratch}/{index}/work"
            os.makedirs(upper)
            os.makedirs(work)
            for name in names:
                os.mknod(f"{upper}/{name}", 0o600 | 0o020000, os.makedev(0, 0))  # an overlay whiteout
            options = f"lowerdir={directory},upperdir={upper},workdir={work}"
            isolation.mount("overlay", directory, "overlay", 0, options)
            hidden += [os.path.join(directory, name) for name in names]
    finally:
        try:
            isolation.umount2(scratch, isolation.MNT_DETACH)
        except OSError:
            pass
        os.rmdir(scratch)
    return hidden


def enter_user_namespace() -> None:
    """Become root of a new user namespace (ids 0..USERNS_IDS-1 identity-mapped, written by a helper
    left outside) in which no further user namespace may be created."""
    go_r, go_w = os.pipe()
    target = os.getpid()
    helper = os.fork()
    if helper == 0:
        code = 1
        try:
            os.close(go_w)
            if os.read(go_r, 1) == b"u":
                for kind in ("uid_map", "gid_map"):
                    with open(f"/proc/{target}/{kind}", "w") as fh:
                        fh.write(f"0 0 {USERNS_IDS}\n")
                code = 0
        except OSError as exc:
            sys.stderr.write(f"{PROG}: cannot write the id maps: {exc}\n")
        finally:
            os._exit(code)
    os.close(go_r)
    try:
        isolation.unshare(isolation.CLONE_NEWUSER)
    except OSError as exc:
        os.close(go_w)
        os.waitpid(helper, 0)
        raise SetupError(f"cannot create the user namespace ({exc.strerror})") from exc
    os.write(go_w, b"u")
    os.close(go_w)
    _, status = os.waitpid(helper, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SetupError("cannot map ids into the user namespace")
    with open("/proc/sys/user/max_user_namespaces", "w") as fh:
        fh.write("0")


def cut_capabilities(mask: int = DOCKER_CAPABILITY_MASK) -> list[str]:
    """Bounding set, effective and permitted set to `mask` (less what this process lacks already);
    ambient and inheritable emptied. Returns the names of Docker's capabilities kept."""
    mask &= isolation.capability_set("CapPrm")
    for cap in range(isolation.last_capability() + 1):
        if not mask & (1 << cap):
            isolation.prctl(isolation.PR_CAPBSET_DROP, cap)
    isolation.prctl(isolation.PR_CAP_AMBIENT, isolation.PR_CAP_AMBIENT_CLEAR_ALL)
    try:
        isolation.set_capabilities(mask)
    except OSError as exc:
        raise SetupError(str(exc)) from exc
    return [name for name, number in DOCKER_CAPABILITIES.items() if mask & (1 << number)]


def resolve_user(spec: str) -> tuple[int, int]:
    """(uid, gid) for a user name or a uid (an unknown uid gets gid = uid)."""
    if spec.isdigit():
        try:
            return int(spec), pwd.getpwuid(int(spec)).pw_gid
        except KeyError:
            return int(spec), int(spec)
    try:
        entry = pwd.getpwnam(spec)
    except KeyError:
        raise SetupError(f"no such user: {spec}") from None
    return entry.pw_uid, entry.pw_gid


def become(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)  # from uid 0 to another: effective and permitted capabilities go


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {PROG}", description="Run COMMAND as in a container.")
    parser.add_argument("--no-landlock", choices=("enosys", "eperm"), help="the Landlock calls fail so")
    parser.add_argument("--no-seccomp", action="store_true", help="COMMAND cannot install seccomp filters")
    parser.add_argument("--no-libseccomp", action="store_true", help="hide libseccomp from COMMAND")
    parser.add_argument("--no-userns", action="store_true", help="the kernel refuses new user namespaces")
    parser.add_argument("--no-namespace-filter", action="store_true", help="no Docker-like namespace rules")
    parser.add_argument("--user", help="run COMMAND as this user name or uid")
    parser.add_argument("--print", action="store_true", help="print what was applied (JSON) on stderr")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("no COMMAND given (after --)")
    return args


def setup(args: argparse.Namespace) -> dict[str, object]:
    """Everything before the exec, in order; returns what was applied."""
    target = resolve_user(args.user) if args.user is not None else None
    flt: Filter = build(policy(args))  # loads libseccomp and compiles, before anything can hide it
    applied: dict[str, object] = {
        "seccomp": [f"{name} -> {errno.errorcode[code]} ({cond})" for name, code, cond in flt.rules],
        "seccomp_skipped": flt.skipped,
    }
    flt.release()
    if args.no_libseccomp:
        applied["libseccomp_hidden"] = hide_libseccomp()
    if args.no_userns:
        enter_user_namespace()
        applied["user_namespace"] = {"ids": f"0-{USERNS_IDS - 1}", "max_user_namespaces": 0}
    applied["capabilities"] = cut_capabilities()
    flt.load()  # sets no_new_privs; the program was compiled above
    applied["no_new_privs"] = True
    if target is not None:
        become(*target)
        applied["user"] = {"uid": target[0], "gid": target[1]}
    return applied


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if os.geteuid() != 0:
        print(
            f"{PROG}: must run as root (it sets capabilities, mounts and a seccomp filter)", file=sys.stderr
        )
        return 2
    try:
        applied = setup(args)
    except (OSError, SetupError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    if args.print:
        print(json.dumps(applied), file=sys.stderr, flush=True)
    try:
        os.execvp(args.command[0], args.command)
    except OSError as exc:
        print(f"{PROG}: cannot run {args.command[0]}: {exc.strerror}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main())
