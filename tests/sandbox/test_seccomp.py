"""rlmx.sandbox.seccomp against the real kernel: the worker filter is built in this process (as the
zygote builds it before fork) and loaded in a forked child, which tries the calls and reports back."""

from __future__ import annotations

import ctypes
import errno
import json
import mmap
import os
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from rlmx.sandbox import seccomp

pytestmark = [
    pytest.mark.skipif(not os.uname().sysname == "Linux", reason="seccomp is Linux-only"),
    pytest.mark.skipif(seccomp.unavailable_reason() is not None, reason=str(seccomp.unavailable_reason())),
]

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
X32_SYSCALL_BIT = 0x40000000
GETPID_X86_64, GETPID_I386 = 39, 20


def outcome(call: Callable[[], object]) -> str:
    """'ok' or the errno name a call fails with (OSError, or -1 from a libc function)."""
    try:
        result = call()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc.errno))
    if isinstance(result, int) and result == -1:
        return errno.errorcode.get(ctypes.get_errno(), "?")
    return "ok"


def in_filtered_child(flt: seccomp.Filter | None, probe: Callable[[], object]) -> tuple[int, object]:
    """Fork; the child loads `flt`, runs `probe` and writes its JSON result to a pipe. Returns the
    child's wait status and the result (None when the child wrote nothing)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(read_fd)
            if flt is not None:
                flt.load()
            os.write(write_fd, json.dumps(probe()).encode())
        except BaseException as exc:
            os.write(write_fd, json.dumps({"error": repr(exc)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    return status, (json.loads(data) if data else None)


@pytest.fixture(scope="module")
def worker() -> seccomp.Filter:
    return seccomp.worker_filter()


def test_the_worker_filter_refuses_what_model_code_must_not_do(
    worker: seccomp.Filter, tmp_path: Path
) -> None:
    target = tmp_path / "file"
    target.write_text("data")

    def probe() -> dict[str, object]:
        found: dict[str, object] = {}
        for name in ("AF_INET", "AF_UNIX", "AF_NETLINK", "AF_PACKET"):
            found[name] = outcome(lambda name=name: socket.socket(getattr(socket, name), socket.SOCK_DGRAM))
        found["socketpair"] = outcome(socket.socketpair)
        found["chmod"] = outcome(lambda: os.chmod(target, 0o600))
        found["utime"] = outcome(lambda: os.utime(target, (1, 1)))
        found["chown"] = outcome(lambda: os.chown(target, 0, 0))
        found["truncate"] = outcome(lambda: os.truncate(target, 1))
        with open(target, "r+b") as fh:
            found["ftruncate"] = outcome(lambda: os.ftruncate(fh.fileno(), 2))
        found["ptrace"] = outcome(
            lambda: _libc.ptrace(ctypes.c_long(16), ctypes.c_int(1), None, None)
        )  # ATTACH
        found["unshare"] = outcome(lambda: _libc.unshare(ctypes.c_int(seccomp.CLONE_NEWUSER)))
        found["clone3"] = outcome(lambda: _libc.syscall(ctypes.c_long(435), None, ctypes.c_size_t(0)))
        found["personality"] = outcome(lambda: _libc.personality(ctypes.c_ulong(0x0040000)))  # no ASLR
        found["personality(0)"] = outcome(lambda: _libc.personality(ctypes.c_ulong(0)))
        child = os.fork()  # a plain clone (glibc's fork uses clone(SIGCHLD|...), no CLONE_NEW* flag)
        if child == 0:
            os._exit(7)
        found["fork"] = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
        seen: list[int] = []
        thread = threading.Thread(target=lambda: seen.append(threading.get_native_id()))
        thread.start()
        thread.join()
        found["thread"] = len(seen)
        found["size"] = os.path.getsize(target)
        return found

    status, found = in_filtered_child(worker, probe)
    assert os.waitstatus_to_exitcode(status) == 0, found
    assert found == {
        "AF_INET": "EPERM",
        "AF_UNIX": "EPERM",
        "AF_NETLINK": "EPERM",
        "AF_PACKET": "EPERM",
        "socketpair": "ok",
        "chmod": "EPERM",
        "utime": "EPERM",
        "chown": "EPERM",
        "truncate": "EPERM",
        "ftruncate": "ok",
        "ptrace": "EPERM",
        "unshare": "EPERM",
        "clone3": "ENOSYS",
        "personality": "EPERM",
        "personality(0)": "ok",
        "fork": 7,
        "thread": 1,
        "size": 2,
    }


def test_the_same_calls_work_without_the_filter(tmp_path: Path) -> None:
    """The control: the refusals above come from the filter, not from this machine."""
    target = tmp_path / "file"
    target.write_text("data")

    def probe() -> dict[str, str]:
        return {
            "AF_UNIX": outcome(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).close()),
            "chmod": outcome(lambda: os.chmod(target, 0o600)),
            "truncate": outcome(lambda: os.truncate(target, 1)),
        }

    status, found = in_filtered_child(None, probe)
    assert os.waitstatus_to_exitcode(status) == 0
    assert found == {"AF_UNIX": "ok", "chmod": "ok", "truncate": "ok"}


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the x32 ABI is an x86_64 entry point")
def test_an_x32_system_call_kills_the_filtered_process(worker: seccomp.Filter) -> None:
    def x32_getpid() -> int:
        return int(_libc.syscall(ctypes.c_long(X32_SYSCALL_BIT | GETPID_X86_64)))

    status, _ = in_filtered_child(None, x32_getpid)  # unfiltered: a pid, or -1 (no x32 in this kernel)
    assert os.waitstatus_to_exitcode(status) == 0
    status, found = in_filtered_child(worker, x32_getpid)
    assert found is None
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSYS


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="int 0x80 is the i386 entry point of x86_64")
def test_an_i386_system_call_kills_the_filtered_process(worker: seccomp.Filter) -> None:
    code = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    code.write(bytes([0xB8, GETPID_I386, 0, 0, 0, 0xCD, 0x80, 0xC3]))  # mov eax, 20; int 0x80; ret
    address = ctypes.addressof(ctypes.c_char.from_buffer(code))
    i386_getpid = ctypes.CFUNCTYPE(ctypes.c_int)(address)

    status, pid = in_filtered_child(None, lambda: [i386_getpid(), os.getpid()])
    if not (os.WIFEXITED(status) and isinstance(pid, list) and pid[0] == pid[1]):
        pytest.skip("this kernel has no i386 entry point (ia32 emulation off)")
    status, found = in_filtered_child(worker, i386_getpid)
    assert found is None
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSYS


def test_every_rule_resolves_on_x86_64_and_aarch64() -> None:
    """Names only one architecture has (chmod, chown, utime... exist on aarch64 as *at calls only) are
    skipped there, and each group still has the calls that architecture does have."""
    x86 = {rule.name: seccomp.resolve(rule.name, "x86_64") for rule in seccomp.WORKER_POLICY}
    arm = {rule.name: seccomp.resolve(rule.name, "aarch64") for rule in seccomp.WORKER_POLICY}
    assert [name for name, number in x86.items() if number is None] == []
    missing_on_arm = {name for name, number in arm.items() if number is None}
    assert missing_on_arm == {"chmod", "chown", "lchown", "utime", "utimes", "futimesat", "iopl", "ioperm"}
    for name in ("fchmodat", "fchmodat2", "fchownat", "utimensat", "socket", "clone", "clone3", "truncate"):
        assert arm[name] is not None, name
    assert arm["socket"] == 198 and x86["socket"] == 41  # each architecture's own numbering
    assert x86["setxattrat"] == arm["setxattrat"] == 463  # newer than libseccomp 2.5: by number


def test_the_native_filter_skips_nothing_on_this_machine(worker: seccomp.Filter) -> None:
    native = {rule.name for rule in seccomp.WORKER_POLICY if seccomp.resolve(rule.name) is None}
    assert set(worker.skipped) == native
    assert len(worker.export_bpf()) % 8 == 0 and len(worker.export_bpf()) > 8 * len(worker.rules)


def test_deny_skips_unknown_names_and_conditions_on_arg0() -> None:
    with seccomp.Filter() as flt:
        assert flt.deny("no_such_call", errno.EPERM) is False
        assert flt.skipped == ["no_such_call"]
        assert flt.deny("getcwd", errno.EACCES) is True
        assert flt.deny("dup", errno.E2BIG, arg0_masked=(0xFF, 0x55)) is True
        assert flt.deny("getpgid", errno.EINVAL, arg0_ne=0) is True
        flt.export_bpf()

        def probe() -> dict[str, str]:
            return {
                "getcwd": outcome(os.getcwd),
                "dup(0x55)": outcome(lambda: _libc.dup(ctypes.c_int(0x155))),  # masked: 0x155 & 0xff
                "dup(1)": outcome(lambda: os.close(os.dup(1))),
                "getpgid(0)": outcome(lambda: os.getpgid(0)),
                "getpgid(pid)": outcome(lambda: os.getpgid(os.getpid())),
            }

        status, found = in_filtered_child(flt, probe)
    assert os.waitstatus_to_exitcode(status) == 0, found
    assert found == {
        "getcwd": "EACCES",
        "dup(0x55)": "E2BIG",
        "dup(1)": "ok",
        "getpgid(0)": "ok",
        "getpgid(pid)": "EINVAL",
    }
    with pytest.raises(seccomp.SeccompError):
        flt.deny("getpid", errno.EPERM)  # released


def test_a_filter_keeps_a_bad_default_out() -> None:
    with pytest.raises(ValueError, match="unknown default action"):
        seccomp.Filter(default="deny")
