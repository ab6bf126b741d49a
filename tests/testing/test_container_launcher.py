"""rlmx.testing.container on the real kernel: each test runs the launcher as a subprocess around a small
Python (or shell) program that reports what it can do inside."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlmx.sandbox import seccomp
from rlmx.testing import container

SRC = str(Path(__file__).resolve().parents[2] / "src")

pytestmark = [
    pytest.mark.skipif(os.uname().sysname != "Linux", reason="the launcher is Linux-only"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the launcher needs root"),
    pytest.mark.skipif(seccomp.unavailable_reason() is not None, reason=str(seccomp.unavailable_reason())),
]

# the program run inside: what it holds and how the interesting calls end, as one JSON line on stdout
PROBE = """
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def ends(result):
    return "ok" if result != -1 else errno.errorcode[ctypes.get_errno()]
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
from rlmx.sandbox import seccomp
print(json.dumps({
    "uid": os.getuid(),
    "CapBnd": status["CapBnd"].strip(), "CapEff": status["CapEff"].strip(),
    "NoNewPrivs": status["NoNewPrivs"].strip(),
    "unshare": ends(libc.unshare(0x10000000)),
    "clone3": ends(libc.syscall(ctypes.c_long(435), None, ctypes.c_size_t(0))),
    "landlock": ends(libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))),
    "set_seccomp": ends(libc.prctl(22, 2, ctypes.c_ulong(0), 0, 0)),
    "seccomp_unavailable": seccomp.unavailable_reason(),
}))
"""
DOCKER_MASK = f"{container.DOCKER_CAPABILITY_MASK:016x}"


def launch(*options: str, command: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable,
        "-m",
        "rlmx.testing.container",
        *options,
        "--",
        *(command or [sys.executable, "-c", PROBE]),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)


def probe(*options: str) -> dict[str, object]:
    done = launch(*options)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_the_docker_capability_set() -> None:
    assert len(container.DOCKER_CAPABILITIES) == 14
    assert container.DOCKER_CAPABILITY_MASK == 0xA80425FB  # CapBnd of a default Docker container


def test_root_gets_dockers_capabilities_and_namespace_rules() -> None:
    done = launch("--print")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["uid"] == 0
    assert found["CapBnd"] == found["CapEff"] == DOCKER_MASK
    assert found["NoNewPrivs"] == "1"
    assert found["unshare"] == "EPERM"
    assert found["clone3"] == "ENOSYS"
    assert found["landlock"] == "ok"  # no --no-landlock: the ABI version (the kernel has Landlock)
    assert found["set_seccomp"] == "EFAULT"  # filters can be installed (the NULL program is refused)
    assert found["seccomp_unavailable"] is None
    applied = json.loads(done.stderr.strip().splitlines()[-1])
    assert applied["capabilities"] == list(container.DOCKER_CAPABILITIES)
    assert "unshare -> EPERM (always)" in applied["seccomp"]
    assert applied["no_new_privs"] is True


def test_without_the_namespace_filter_root_may_still_unshare() -> None:
    """The control for the rule above: without it the kernel lets root make a user namespace."""
    assert probe("--no-namespace-filter")["unshare"] == "ok"


@pytest.mark.parametrize(("option", "expected"), [("enosys", "ENOSYS"), ("eperm", "EPERM")])
def test_no_landlock(option: str, expected: str) -> None:
    assert probe(f"--no-landlock={option}")["landlock"] == expected


def test_no_seccomp() -> None:
    found = probe("--no-seccomp")
    assert found["set_seccomp"] == "EINVAL"
    assert "seccomp filters are refused" in str(found["seccomp_unavailable"])


def test_no_libseccomp() -> None:
    done = launch("--no-libseccomp", "--print")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert str(found["seccomp_unavailable"]).startswith("libseccomp is not installed")
    assert found["CapBnd"] == DOCKER_MASK  # the rest is applied as usual (loaded before it was hidden)
    hidden = json.loads(done.stderr.strip().splitlines()[-1])["libseccomp_hidden"]
    assert any(path.endswith(seccomp.SONAME) for path in hidden)
    assert all(os.path.exists(path) for path in hidden)  # outside the launcher nothing changed


def test_no_userns() -> None:
    assert probe("--no-userns")["unshare"] == "EPERM"  # the filter answers first
    found = probe("--no-userns", "--no-namespace-filter")
    assert found["unshare"] == "ENOSPC"  # the kernel: max_user_namespaces is 0 in this namespace
    assert found["uid"] == 0 and found["CapBnd"] == DOCKER_MASK


def test_user_drops_to_that_uid_without_capabilities() -> None:
    # the test interpreter may live in a home only root can enter: ask the shell instead
    done = launch(
        "--user", "65534", command=["/bin/sh", "-c", "id -u; id -g; id -G; grep '^Cap' /proc/self/status"]
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    assert lines[0] == "65534"
    assert lines[1] == lines[2] != "0"  # its own group, no supplementary groups
    caps = dict(line.split(":\t") for line in lines[3:] if line)
    assert caps["CapEff"] == caps["CapPrm"] == caps["CapInh"] == "0" * 16
    assert caps["CapBnd"] == DOCKER_MASK


def test_failures_are_one_line_with_exit_2() -> None:
    done = launch("--user", "no-such-user-rlmx")
    assert (done.returncode, done.stderr) == (2, "rlmx.testing.container: no such user: no-such-user-rlmx\n")
    done = launch(command=["/nonexistent/command"])
    assert done.returncode == 127
    assert done.stderr.count("\n") == 1 and "cannot run /nonexistent/command" in done.stderr


def test_not_root_is_refused_with_one_line() -> None:
    """A real unprivileged process (a forked child that dropped to uid 65534) runs the launcher."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            with open(write_fd, "w") as err, contextlib.redirect_stderr(err):
                code = container.main(["--", "true"])
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd) as fh:
        message = fh.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 2
    assert (
        message
        == "rlmx.testing.container: must run as root (it sets capabilities, mounts and a seccomp filter)\n"
    )
