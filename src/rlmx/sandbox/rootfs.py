"""The read-only root file system a sandboxed zygote pivots into (and so every worker sees): only what
Python needs, nothing else.

The root is a small tmpfs holding bind mounts, all read-only, nosuid and nodev: the system directories
(/usr, and /bin, /lib... or their merged-/usr symlinks), this Python's installation, its virtual
environment and every directory on its import path (rlmx's own source among them); a few files of
/etc (the loader's cache, time zone, alternatives -- never shadow, keys or host names) with a
synthetic passwd/group; /dev with null, zero, full, random and urandom only; an empty /tmp and /proc
that each worker covers with its own. /root, /home, /var, /run, /sys, the project's other files and
every other directory of the host are simply not there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from rlmx.sandbox.isolation import (
    MNT_DETACH,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_RDONLY,
    MS_REMOUNT,
    bind_readonly,
    mount,
    pivot_root,
    umount2,
)

# Files under /etc a Python REPL may use; nothing else of /etc is visible (no shadow, no keys).
ETC_FILES: tuple[str, ...] = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "alternatives",
    "mime.types",
    "nsswitch.conf",
    "protocols",
    "services",
)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
DEVICES = ("null", "zero", "full", "random", "urandom")
# never bound whole, even when on the import path (their subdirectories may be)
TOO_BROAD = frozenset(
    {"/", "/tmp", "/home", "/root", "/etc", "/var", "/run", "/mnt", "/srv", "/media", "/opt"}
)


def python_paths(extra: Iterable[str] = ()) -> list[str]:
    """The directories this Python needs: its installation, the venv, and every import path."""
    candidates = [sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix]
    candidates += [os.path.dirname(os.path.realpath(sys.executable))]
    candidates += [p for p in sys.path if p and p != os.getcwd()]
    candidates += list(extra)
    out: list[str] = []
    for path in candidates:
        real = os.path.realpath(path)
        if os.path.isfile(real) and real.endswith(".zip"):
            real = os.path.dirname(real)
        if os.path.isdir(real) and real not in TOO_BROAD:
            out.append(real)
    return minimal_cover(out)


def minimal_cover(paths: Iterable[str]) -> list[str]:
    """Drop every path that lies inside another one of the list."""
    kept: list[str] = []
    for path in sorted(set(paths), key=len):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def _mkdirs(root: str, path: str) -> str:
    target = os.path.join(root, path.lstrip("/"))
    os.makedirs(target, mode=0o755, exist_ok=True)
    return target


def _bind_path(root: str, source: str) -> None:
    """Make `source` (a directory or file of the host) visible read-only at the same path in `root`."""
    if os.path.isdir(source):
        bind_readonly(source, _mkdirs(root, source))
        return
    target = os.path.join(_mkdirs(root, os.path.dirname(source)), os.path.basename(source))
    if not os.path.exists(target):
        with open(target, "w"):
            pass
    bind_readonly(source, target)


def _etc(root: str, uid: int) -> None:
    etc = _mkdirs(root, "/etc")
    for name in ETC_FILES:
        host = os.path.join("/etc", name)
        if os.path.islink(host):
            os.symlink(os.readlink(host), os.path.join(etc, name))
        elif os.path.exists(host):
            _bind_path(root, host)
    users = f"root:x:0:0:root:/root:/bin/sh\nrlmx:x:{uid}:{uid}:rlmx sandbox:/tmp:/bin/sh\n"
    users += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    groups = f"root:x:0:\nrlmx:x:{uid}:\nnogroup:x:65534:\n"
    for name, text in (("passwd", users), ("group", groups), ("hosts", "127.0.0.1 localhost\n")):
        with open(os.path.join(etc, name), "w") as fh:
            fh.write(text)
    with open(os.path.join(etc, "resolv.conf"), "w") as fh:
        fh.write("# no network in the rlmx sandbox\n")


def _dev(root: str) -> None:
    dev = _mkdirs(root, "/dev")
    for name in DEVICES:
        target = os.path.join(dev, name)
        with open(target, "w"):
            pass
        mount(f"/dev/{name}", target, None, MS_BIND)
    for name, link in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0")):
        os.symlink(link, os.path.join(dev, name))
    os.symlink("/proc/self/fd/1", os.path.join(dev, "stdout"))
    os.symlink("/proc/self/fd/2", os.path.join(dev, "stderr"))
    os.makedirs(os.path.join(dev, "shm"), mode=0o755)


def build_rootfs(*, staging: str, first_worker_uid: int) -> list[str]:
    """Build a root holding only what Python needs (read-only) and pivot into it. Returns what is bound.

    The zygote must be alone in fresh mount and PID namespaces (it is pid 1). The context's own files
    are not part of the view: the zygote has read them before it gets here."""
    root = staging  # an empty directory the host made for this: mounting on it hides nothing
    mount("rlmx-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    bound: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            os.symlink(os.readlink(path), os.path.join(root, path.lstrip("/")))
        elif os.path.isdir(path):
            _bind_path(root, path)
            bound.append(path)
    for path in python_paths():
        if any(path == d or path.startswith(d + "/") for d in SYSTEM_DIRS) or not os.path.exists(path):
            continue
        _bind_path(root, path)
        bound.append(path)
    _etc(root, first_worker_uid)
    _dev(root)
    for name in ("proc", "tmp"):
        os.makedirs(os.path.join(root, name), mode=0o755, exist_ok=True)
    # a proc of the zygote's PID namespace: the kernel lets a worker mount its own /proc only where a
    # fully visible one exists; each worker covers it with the /proc of its own PID namespace
    mount("proc", os.path.join(root, "proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(root)
    pivot_root(".", ".")
    umount2(".", MNT_DETACH)  # the host's tree, stacked under the new root, is detached
    os.chdir("/")
    mount("none", "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    return bound
