"""What this host offers for isolating model code, seen from the host process (for `rlmx doctor`, and
to refuse a layer asked for by name before a run starts). Cheap and side-effect free: no zygote, no
context. Whether a layer really works is only known once a zygote has built it: `rlmx doctor` also
starts one (`rlmx.sandbox.process`), and a run reports the layer it got (`SandboxReady`).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Any

from rlmx.sandbox import confine, landlock, seccomp
from rlmx.sandbox.isolation import SIMULATE_ENV

_UNSHARE_PROBE = (
    "import ctypes,os\n"
    "libc=ctypes.CDLL(None,use_errno=True)\n"
    "r=libc.unshare(0x10000000)\n"
    "e=ctypes.get_errno()\n"
    "print(0 if r==0 else e)\n"
)


@dataclass(frozen=True)
class HostSupport:
    """None in a `*_missing` field: that part is there; else why not."""

    user_namespaces_missing: str | None
    landlock_abi: int
    landlock_missing: str | None
    seccomp_missing: str | None
    root: bool
    per_worker_uid: bool  # root with CAP_SETUID/SETGID/SETPCAP: the Landlock layer gives each worker a uid
    landlock_layer_missing: str | None  # the Landlock layer as `process` would pick it (None: it would)
    cgroups: str  # for information: v2, v1, none

    def to_data(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def default_layer(self) -> str | None:
        """The layer `process` would use, as far as the host process can tell: namespaces, landlock, None."""
        if self.user_namespaces_missing is None:
            return "namespaces"
        if self.landlock_layer_missing is None:
            return "landlock"
        return None


def user_namespaces_missing() -> str | None:
    """Why no user namespace can be made here (None: one can): the sysctls, then a real `unshare` in a
    small child process (a container's seccomp profile refuses it there)."""
    if not sys.platform.startswith("linux"):
        return f"namespaces need Linux; this is {sys.platform}"
    if os.environ.get(SIMULATE_ENV) == "unavailable":
        return "user namespaces are not permitted (simulated)"
    for path, bad in (
        ("/proc/sys/user/max_user_namespaces", "0"),
        ("/proc/sys/kernel/unprivileged_userns_clone", "0"),
    ):
        try:
            with open(path) as fh:
                value = fh.read().strip()
        except OSError:
            continue
        if value == bad and (path.endswith("max_user_namespaces") or os.geteuid() != 0):
            return f"{path} is {value}"
    try:
        done = subprocess.run(
            [sys.executable, "-S", "-c", _UNSHARE_PROBE], capture_output=True, text=True, timeout=10
        )
        code = int(done.stdout.strip() or -1)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        return f"the unshare probe failed ({exc})"
    if code == 0:
        return None
    if code < 0:
        return f"the unshare probe failed: {done.stderr.strip()[-200:]}"
    return f"cannot create a user namespace (unshare: {os.strerror(code)})"


def cgroups() -> str:
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return "v2"
    if os.path.isdir("/sys/fs/cgroup"):
        return "v1" if os.listdir("/sys/fs/cgroup") else "none"
    return "none"


@functools.lru_cache(maxsize=1)
def host_support() -> HostSupport:
    return HostSupport(
        user_namespaces_missing=user_namespaces_missing(),
        landlock_abi=landlock.abi(),
        landlock_missing=landlock.unavailable_reason(),
        seccomp_missing=seccomp.unavailable_reason(),
        root=os.geteuid() == 0,
        per_worker_uid=confine.can_switch_uid(),
        landlock_layer_missing=confine.why_not(explicit=False),
        cgroups=cgroups(),
    )


def startup_line(backend: str = "process") -> str:
    """Where model code of `backend` would run here, in a few words (a server's start-up log)."""
    support = host_support()
    if backend == "local":
        return "local (UNSAFE: in this process)"
    if backend == "process-unisolated":
        return "process-unisolated (reduced isolation)"
    layer = {"process-namespaces": "namespaces", "process-landlock": "landlock"}.get(backend)
    layer = layer or support.default_layer
    if layer == "namespaces":
        return "namespaces + seccomp" if support.seccomp_missing is None else "namespaces"
    if layer == "landlock":
        ids = "a uid per worker" if support.per_worker_uid else "your uid, signals scoped"
        why = support.user_namespaces_missing
        return f"Landlock (ABI {support.landlock_abi}) + seccomp, {ids}" + (
            f" (no user namespaces: {why})" if why else ""
        )
    return (
        f"NONE: no user namespaces ({support.user_namespaces_missing}); no Landlock layer "
        f"({support.landlock_layer_missing}); runs will refuse to execute model code"
    )


def named_layer_missing(backend: str) -> str | None:
    """Why a layer asked for by name (`process-namespaces`, `process-landlock`) cannot run here; None
    when it can, or for any other backend."""
    if backend == "process-landlock":
        return confine.why_not(explicit=True)
    if backend == "process-namespaces":
        return host_support().user_namespaces_missing
    return None
