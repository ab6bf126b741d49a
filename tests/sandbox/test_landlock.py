"""rlmx.sandbox.landlock on the real kernel: each check runs in a forked child that enforces a policy,
tries things, reports over a pipe and _exits -- the test process itself is never restricted."""

from __future__ import annotations

import errno
import importlib
import json
import os
import signal
import socket
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rlmx.sandbox import landlock
from rlmx.sandbox.landlock import LandlockError, Policy, prepare, python_paths

REPO = Path(__file__).resolve().parents[2]
DEVICES = ("/dev/null", "/dev/urandom")

needs_landlock = pytest.mark.skipif(
    landlock.abi() < 1, reason=f"no Landlock: {landlock.unavailable_reason()}"
)


def in_child(body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run `body` in a forked child; return the dict it reports (or {"error": ...} if it raised)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            try:
                report = body()
            except BaseException as exc:
                report = {"error": f"{type(exc).__name__}: {exc}"}
            os.write(write_end, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    report = json.loads(data)
    assert "error" not in report, report["error"]
    return report


def attempt(action: Callable[[], object]) -> str:
    """'ok', or the errno's name."""
    try:
        action()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))
    return "ok"


def read(path: str | Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(16)


def write(path: str | Path) -> None:
    with open(path, "w") as f:
        f.write("x")


@pytest.fixture
def dirs(tmp_path: Path) -> Iterator[dict[str, Path]]:
    scratch, other, home = tmp_path / "scratch", tmp_path / "other", tmp_path / "home"
    for d in (scratch, other, home):
        d.mkdir()
    (other / "planted").write_text("secret")
    (home / ".netrc").write_text("secret")
    probe = Path(sys.base_prefix) / f"landlock-probe-{uuid.uuid4().hex}"  # in a read_exec dir
    repo_file = REPO / f"landlock-probe-{uuid.uuid4().hex}"
    yield {"scratch": scratch, "other": other, "home": home, "probe": probe, "repo_file": repo_file}
    probe.unlink(missing_ok=True)  # only there if a test failed
    repo_file.unlink(missing_ok=True)


@needs_landlock
def test_worker_policy_allows_python_and_scratch_only(dirs: dict[str, Path]) -> None:
    scratch, other, home = dirs["scratch"], dirs["other"], dirs["home"]
    repo_file = dirs["repo_file"]
    policy = Policy(read_exec=python_paths(), read_write=(str(scratch),), devices=DEVICES)

    def body() -> dict[str, Any]:
        sys.modules.pop("fractions", None)  # imported again: its files are read after enforce
        # a C extension nothing imported yet (other tests of the run may have loaded sqlite3)
        extension = next(
            m for m in ("_sqlite3", "audioop", "_curses", "_lsprof", "cmath") if m not in sys.modules
        )
        fresh = [m for m in ("fractions", extension) if m not in sys.modules]
        prepare(policy).enforce()
        import fractions
        import sqlite3

        importlib.import_module(extension)
        out: dict[str, Any] = {"fresh": fresh, "fraction": str(fractions.Fraction(3, 6))}
        out["sqlite"] = sqlite3.connect(":memory:").execute("select 40 + 2").fetchone()[0]
        out["urandom"] = len(read("/dev/urandom"))
        out["devnull"] = attempt(lambda: write("/dev/null"))
        sub = scratch / "sub"
        out["scratch"] = [
            attempt(lambda: write(scratch / "a")),
            attempt(lambda: os.rename(scratch / "a", scratch / "b")),
            attempt(lambda: sub.mkdir()),
            attempt(lambda: os.rename(scratch / "b", sub / "c")),  # REFER within the scratch
            attempt(lambda: os.truncate(sub / "c", 0)),
            attempt(lambda: os.unlink(sub / "c")),
            attempt(lambda: sub.rmdir()),
        ]
        out["denied"] = {
            "planted": attempt(lambda: read(other / "planted")),
            "shadow": attempt(lambda: read("/etc/shadow")),
            "passwd": attempt(lambda: read("/etc/passwd")),
            "list /proc": attempt(lambda: os.listdir("/proc")),
            "proc status": attempt(lambda: read("/proc/self/status")),
            "home": attempt(lambda: read(home / ".netrc")),
            "list real home": attempt(lambda: os.listdir(os.path.expanduser("~"))),
            "write other": attempt(lambda: write(other / "new")),
            "write /tmp": attempt(lambda: write(f"/tmp/landlock-probe-{uuid.uuid4().hex}")),
            "write repo": attempt(lambda: write(repo_file)),
            "create in read_exec": attempt(lambda: write(dirs["probe"])),
            "mkdir in read_exec": attempt(lambda: os.mkdir(Path(sys.prefix) / "landlock-probe")),
        }
        out["cpu_count"] = os.cpu_count()
        return out

    report = in_child(body)
    assert len(report["fresh"]) == 2, "the imports must load files after enforce"
    assert (report["fraction"], report["sqlite"], report["urandom"], report["devnull"]) == (
        "1/2",
        42,
        16,
        "ok",
    )
    assert report["scratch"] == ["ok"] * 7
    assert report["denied"] == {name: "EACCES" for name in report["denied"]}
    assert report["cpu_count"] >= 1  # a system call, no /proc needed
    assert sorted(p.name for p in scratch.iterdir()) == []
    assert not (other / "new").exists() and not repo_file.exists() and not dirs["probe"].exists()


@needs_landlock
def test_not_covered_stat_chmod_utime(dirs: dict[str, Path]) -> None:
    """Landlock has no right for metadata: the per-worker uid is what stops these."""
    planted = dirs["other"] / "planted"

    def body() -> dict[str, Any]:
        prepare(Policy(read_exec=python_paths())).enforce()
        return {
            "stat shadow": os.stat("/etc/shadow").st_size > 0,
            "chmod": attempt(lambda: os.chmod(planted, 0o640)),
            "utime": attempt(lambda: os.utime(planted, (0, 0))),
            "read": attempt(lambda: read(planted)),
        }

    assert in_child(body) == {"stat shadow": True, "chmod": "ok", "utime": "ok", "read": "EACCES"}
    assert planted.stat().st_mode & 0o777 == 0o640 and planted.stat().st_mtime == 0


@pytest.fixture
def tcp_listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server


def connect_tcp(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


def bind_tcp() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))


@pytest.mark.skipif(landlock.abi() < 4, reason="TCP rules need Landlock ABI 4")
def test_tcp_connect_and_bind_denied(tcp_listener: socket.socket) -> None:
    port = tcp_listener.getsockname()[1]
    before = attempt(lambda: connect_tcp(port))

    def body() -> dict[str, Any]:
        prepare(Policy(read_exec=python_paths())).enforce()
        return {"connect": attempt(lambda: connect_tcp(port)), "bind": attempt(bind_tcp)}

    assert before == "ok"
    assert in_child(body) == {"connect": "EACCES", "bind": "EACCES"}


@pytest.mark.skipif(landlock.abi() < 6, reason="scoping needs Landlock ABI 6")
def test_scope_signals_and_abstract_sockets() -> None:
    parent = os.getpid()
    name = f"\0rlmx-landlock-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(name)
        server.listen()

        def connect_abstract() -> None:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(name)

        def body() -> dict[str, Any]:
            prepare(Policy(read_exec=python_paths())).enforce()
            grandchild = os.fork()
            if grandchild == 0:
                time.sleep(30)
                os._exit(0)
            killed = attempt(lambda: os.kill(grandchild, signal.SIGKILL))
            _, status = os.waitpid(grandchild, 0)
            return {
                "kill parent": attempt(lambda: os.kill(parent, 0)),
                "abstract": attempt(connect_abstract),
                "kill own child": killed,
                "child signalled": os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL,
            }

        report = in_child(body)
        server.setblocking(False)
        assert attempt(server.accept) == "EAGAIN"  # nothing reached the listener
    assert report == {
        "kill parent": "EPERM",
        "abstract": "EPERM",
        "kill own child": "ok",
        "child signalled": True,
    }


@needs_landlock
def test_abi_1_leaves_network_and_signals_open(tcp_listener: socket.socket, dirs: dict[str, Path]) -> None:
    """Why the lead pairs a low ABI with seccomp: only the filesystem is restricted."""
    port, parent, scratch = tcp_listener.getsockname()[1], os.getpid(), dirs["scratch"]
    (scratch / "d").mkdir()

    def body() -> dict[str, Any]:
        prepared = prepare(Policy(read_exec=python_paths(), read_write=(str(scratch),)), abi=1)
        out: dict[str, Any] = {"abi": prepared.abi, "handled": prepared.handled}
        prepared.enforce()
        write(scratch / "f")
        out.update(
            connect=attempt(lambda: connect_tcp(port)),
            kill=attempt(lambda: os.kill(parent, 0)),
            shadow=attempt(lambda: read("/etc/shadow")),
            reparent=attempt(lambda: os.rename(scratch / "f", scratch / "d" / "f")),  # no REFER in ABI 1
        )
        return out

    report = in_child(body)
    assert report["abi"] == 1 and report["handled"] == {"fs": (1 << 13) - 1, "net": 0, "scoped": 0}
    assert (report["connect"], report["kill"], report["shadow"], report["reparent"]) == (
        "ok",
        "ok",
        "EACCES",
        "EXDEV",
    )


@needs_landlock
def test_handled_rights_per_abi() -> None:
    counts = []
    for version in range(1, landlock.abi() + 1):
        prepared = prepare(Policy(), abi=version)
        prepared.close()
        assert prepared.abi == version
        counts.append(
            (bin(prepared.handled["fs"]).count("1"), prepared.handled["net"], prepared.handled["scoped"])
        )
    expected = [(13, 0, 0), (14, 0, 0), (15, 0, 0), (15, 3, 0), (16, 3, 0), (16, 3, 3), (16, 3, 3)]
    assert counts == expected[: len(counts)]


def test_unavailable_reason_clauses(monkeypatch: pytest.MonkeyPatch) -> None:
    real = landlock.abi()
    assert (landlock.unavailable_reason() is None) == (real >= 1)
    clauses = {}
    for err in (errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM, errno.EINVAL):
        monkeypatch.setattr(landlock, "_probe", (0, err))
        assert landlock.abi() == 0
        clauses[err] = landlock.unavailable_reason()
        with pytest.raises(LandlockError, match=r"^landlock unavailable: ") as caught:
            prepare(Policy())
        assert "\n" not in str(caught.value)
    assert "CONFIG_SECURITY_LANDLOCK" in clauses[errno.ENOSYS] and "ENOSYS" in clauses[errno.ENOSYS]
    assert "lsm=" in clauses[errno.EOPNOTSUPP]
    assert "refuses Landlock" in clauses[errno.EPERM]
    assert clauses[errno.EINVAL] == f"landlock_create_ruleset: {os.strerror(errno.EINVAL)}"


@needs_landlock
def test_missing_path_skipped_and_file_with_dir_rights_masked(dirs: dict[str, Path]) -> None:
    scratch, missing = dirs["scratch"], str(dirs["other"] / "missing")
    target = scratch / "only-file"
    target.write_text("start")

    def body() -> dict[str, Any]:
        prepared = prepare(Policy(read_exec=(missing, *python_paths()), read_write=(str(target),)))
        skipped = list(prepared.skipped)
        prepared.enforce()
        return {
            "skipped": skipped,
            "write file": attempt(lambda: write(target)),
            "read file": attempt(lambda: read(target)),
            "sibling": attempt(lambda: write(scratch / "sibling")),
        }

    assert in_child(body) == {
        "skipped": [missing],
        "write file": "ok",
        "read file": "ok",
        "sibling": "EACCES",
    }
    assert target.read_text() == "x"


@needs_landlock
def test_errors_are_one_line() -> None:
    prepared = prepare(Policy())
    prepared.close()
    prepared.close()  # idempotent
    with pytest.raises(LandlockError) as caught:
        prepared.enforce()
    assert caught.value.errno == errno.EBADF and str(caught.value).startswith("landlock_restrict_self: ")
    too_high = landlock.abi() + 1
    with pytest.raises(LandlockError) as asked:
        prepare(Policy(), abi=too_high)
    assert asked.value.errno == errno.EINVAL and f"ABI {too_high} asked" in str(asked.value)
    for error in (caught.value, asked.value):
        assert "\n" not in str(error) and isinstance(error, OSError)


def test_python_paths_are_minimal() -> None:
    paths = python_paths()
    home = os.path.realpath(os.path.expanduser("~"))
    assert all(os.path.exists(p) and os.path.realpath(p) == p for p in paths)
    assert not [(a, b) for a in paths for b in paths if b.startswith(a.rstrip("/") + "/")]

    def covered(path: str) -> bool:
        real = os.path.realpath(path)
        return any(real == p or real.startswith(p + "/") for p in paths)

    assert covered(sys.base_prefix) and covered(sys.executable) and covered(os.__file__)
    assert covered("/etc/ld.so.cache") or not os.path.exists("/etc/ld.so.cache")
    for outside in ("/etc/shadow", "/etc/passwd", "/etc/group", "/proc/self/status", "/tmp", home):
        assert not covered(outside), outside
    assert not [p for p in paths if home.startswith(p.rstrip("/") + "/") or p == home]


@needs_landlock
def test_cost() -> None:
    """prepare(python_paths) + enforce, median of 50 forked children (the module docstring quotes it)."""
    policy = Policy(read_exec=python_paths(), read_write=("/nonexistent-scratch",), devices=DEVICES)

    def body() -> dict[str, Any]:
        start = time.perf_counter()
        prepare(policy).enforce()
        return {"seconds": time.perf_counter() - start}

    median = statistics.median(in_child(body)["seconds"] for _ in range(50))
    print(f"landlock prepare+enforce median: {median * 1000:.3f} ms")
    assert median < 0.05
