"""The Landlock attacks, run from a pytest INSIDE the container launcher (tests/sandbox/test_container.py
starts it, as root and as uid 65534, with RLMX_IN_CONTAINER=1; anywhere else every test here is
skipped). The host this pytest sets up: a temp HOME holding the user's rlmx config with a key, a 0600
file, another run's trace under XDG_STATE_HOME, a `sleep` with a secret in its environment, TCP/UDP
listeners on 127.0.0.1, an abstract and a by-path unix socket, a 0666 file in a world-writable
directory. After each run the host is judged: nothing secret reached the model server or the trace,
no listener was reached, the file's mode, mtime and content are unchanged, no file named with the
run's token exists anywhere it could be written, the `sleep` lives (not stopped, not traced), no
process of the run is left, and the run ended as it should.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import socket
import string
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from attack_cases import Attack
from attack_cases.landlock import LANDLOCK_ATTACKS
from container_support import IN_CONTAINER_ENV, REPO
from policies import is_forced_final, is_rlm, is_sub, repl, turn
from rlmx import RLM, Limits, ModelOptions, SandboxSettings
from rlmx.testing import ScriptedServer
from sandbox_support import FOLLOW_UP, QUESTION, STILL_HERE, Outcome, descendants

pytestmark = [
    pytest.mark.container,
    pytest.mark.skipif(not os.environ.get(IN_CONTAINER_ENV), reason="runs inside the launcher only"),
]
SETTINGS = SandboxSettings(
    cell_timeout_s=3.0, cell_cpu_s=2, memory_mb=1024, max_processes=48, scratch_mb=64, max_file_mb=32
)
MAX_LLM_CALLS = 12


def _listen(family: int, kind: int, address: Any) -> socket.socket:
    sock = socket.socket(family, kind)
    sock.bind(address)
    if kind == socket.SOCK_STREAM:
        sock.listen(16)
    sock.setblocking(False)
    return sock


def _pending(sock: socket.socket) -> int:
    count = 0
    while True:
        try:
            if sock.type == socket.SOCK_STREAM:
                sock.accept()[0].close()
            else:
                sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return count
        count += 1


@dataclass
class ContainerHost:
    tmp: Path
    home: Path
    wwdir: Path
    token: str
    needles: dict[str, str]
    listeners: dict[str, socket.socket]
    sleeper: subprocess.Popen[bytes]
    target: Path
    target_stat: tuple[int, int, str]  # mode, mtime_ns, content
    namespaces: dict[int, dict[str, str]] = dataclasses.field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        return {
            "CONFIG": self.home / ".config" / "rlmx" / "config.toml",
            "PRIVATE": self.tmp / "private.txt",
            "OTHER_TRACE": Path(os.environ["XDG_STATE_HOME"]) / "rlmx" / "traces" / "other-run.jsonl",
            "SLEEP_PID": self.sleeper.pid,
            "HOST_PID": os.getpid(),
            "PORT": self.listeners["tcp"].getsockname()[1],
            "UDP": self.listeners["udp"].getsockname()[1],
            "ABSTRACT": f"rlmx-ct-{self.token}",
            "UNIXPATH": self.wwdir / "host.sock",
            "TARGET": self.target,
            "WWDIR": self.wwdir,
            "TOKEN": self.token,
            "TMP": self.tmp,
            "REPO": REPO,
            "HOME": self.home,
        }


def _target_stat(path: Path) -> tuple[int, int, str]:
    info = path.stat()
    return info.st_mode, info.st_mtime_ns, path.read_text()


@pytest.fixture(scope="module")
def chost(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContainerHost]:
    token = uuid.uuid4().hex[:12]
    tmp = tmp_path_factory.mktemp("container-host")
    home = tmp / "home"
    (home / ".config" / "rlmx").mkdir(parents=True)
    key = f"sk-test-CONFIGKEY-{uuid.uuid4().hex}"
    (home / ".config" / "rlmx" / "config.toml").write_text(f'[providers.openai]\napi_key = "{key}"\n')
    private = tmp / "private.txt"
    private.write_text(f"PRIVATE-{uuid.uuid4().hex}")
    private.chmod(0o600)
    wwdir = Path(tempfile.mkdtemp(prefix=f"rlmx-ww-{token}-"))
    wwdir.chmod(0o1777)
    target = wwdir / "target.txt"
    target.write_text("host data")
    target.chmod(0o666)
    os.utime(target, (1_000_000_000, 1_000_000_000))
    secret_env = f"SLEEP-SECRET-{uuid.uuid4().hex}"
    sleeper = subprocess.Popen(
        ["sleep", "3600"], env={"RLMX_SLEEP_SECRET": secret_env, "PATH": "/usr/bin:/bin"}
    )
    listeners = {
        "tcp": _listen(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0)),
        "udp": _listen(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0)),
        "abstract": _listen(socket.AF_UNIX, socket.SOCK_STREAM, f"\0rlmx-ct-{token}"),
        "unix": _listen(socket.AF_UNIX, socket.SOCK_STREAM, str(wwdir / "host.sock")),
    }
    (wwdir / "host.sock").chmod(0o777)
    needles = {"config key": key, "private file": private.read_text(), "sleep's environment": secret_env}
    with contextlib.suppress(OSError):
        needles["/etc/shadow"] = Path("/etc/shadow").read_text()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        yield ContainerHost(
            tmp, home, wwdir, token, needles, listeners, sleeper, target, _target_stat(target)
        )
    sleeper.kill()
    sleeper.wait()
    for sock in listeners.values():
        sock.close()
    shutil.rmtree(wwdir, ignore_errors=True)


@pytest.fixture(autouse=True)
def _other_trace(chost: ContainerHost) -> None:
    """Another run's trace, in this test's state dir (tests/conftest.py sets XDG_STATE_HOME per test)."""
    path = Path(chost.fields()["OTHER_TRACE"])
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = f"OTHER-RUN-{uuid.uuid4().hex}"
    path.write_text(f'{{"type": "run_start", "question": "{secret}"}}\n')
    chost.needles["another run's trace"] = secret


def _namespaces(pid: int | str) -> dict[str, str]:
    """What this process can tell of `pid`'s namespaces: its uid_map and NSpid (readable by any uid:
    a new user or PID namespace shows there), and the ns links where ptrace rules let it read them."""
    found = {"uid_map": " ".join(Path(f"/proc/{pid}/uid_map").read_text().split())}
    status = Path(f"/proc/{pid}/status").read_text()
    found["NSpid depth"] = str(len(re.search(r"^NSpid:(.*)$", status, re.M).group(1).split()))  # type: ignore[union-attr]
    for kind in ("user", "mnt", "net", "pid"):
        with contextlib.suppress(OSError):
            found[kind] = os.readlink(f"/proc/{pid}/ns/{kind}")
    return found


def _processes_with(marker: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
    return found


def run(chost: ContainerHost, code: str, settings: SandboxSettings, on_sub: Any = None) -> Outcome:
    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if is_sub(request) and on_sub is not None:
            on_sub(messages[-1]["content"])
        if not is_rlm(request):
            return "sub-ok"
        if is_forced_final(request):
            return "FINAL(forced)"
        return [repl(code), FOLLOW_UP, "FINAL(done)"][min(turn(messages), 2)]

    with ScriptedServer(policy) as srv:
        rlm = RLM(
            "openai:scripted",
            model_options=ModelOptions(base_url=srv.url),
            sandbox=settings,
            limits=Limits(max_iterations=4, max_llm_calls=MAX_LLM_CALLS),
            trace=chost.tmp / f"trace-{uuid.uuid4().hex[:8]}.jsonl",
        )
        result = rlm.run(QUESTION, "ctx")
        requests = list(srv.requests)
    return Outcome(result, requests, Path(result.trace_path or "").read_text())


def snoop_namespaces(chost: ContainerHost) -> Any:
    """A sub-call hook: when the cell asks, record the namespaces of every process under this one."""

    def hook(prompt: str) -> None:
        if "CHECK-NAMESPACES" in prompt:
            for pid in descendants(os.getpid()):
                with contextlib.suppress(OSError):
                    chost.namespaces[pid] = _namespaces(pid)

    return hook


def written_with_token(chost: ContainerHost) -> list[str]:
    found = []
    tops = ["/tmp", "/var/tmp", "/dev/shm", str(REPO), str(chost.home), str(chost.tmp)]
    for top in tops:
        for root, dirs, files in os.walk(top):
            dirs[:] = [
                d for d in dirs if not d.startswith(("rlmx-uservenv-", "rlmx-usertests-", "pytest-of-"))
            ]
            found += [os.path.join(root, n) for n in [*dirs, *files] if f"pwned-{chost.token}" in n]
    return found + [str(p) for p in Path(tempfile.gettempdir()).glob(f"pytest-of-*/**/*pwned-{chost.token}*")]


def left_behind(chost: ContainerHost, within_s: float = 10.0) -> set[int]:
    """Processes under this one other than the `sleep`, once they had `within_s` to go."""
    deadline = time.monotonic() + within_s
    while (left := descendants(os.getpid()) - {chost.sleeper.pid}) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def assert_host_untouched(chost: ContainerHost, out: Outcome) -> None:
    layer = [line for line in out.trace.splitlines() if '"sandbox_ready"' in line]
    assert layer and '"layer": "landlock"' in layer[0], layer
    seen = "\n".join([out.bodies, out.trace, str(out.result.answer), str(out.result.error)])
    for what, needle in chost.needles.items():
        assert needle not in seen, f"{what} leaked"
    for name, sock in chost.listeners.items():
        assert _pending(sock) == 0, f"the host's {name} listener was reached"
    assert _target_stat(chost.target) == chost.target_stat, "the host file's mode, mtime or content changed"
    assert sorted(p.name for p in chost.wwdir.iterdir()) == ["host.sock", "target.txt"]
    assert written_with_token(chost) == [], "files were written outside the scratch directory"
    status = Path(f"/proc/{chost.sleeper.pid}/status").read_text()
    assert chost.sleeper.poll() is None and "\nTracerPid:\t0\n" in status, status
    assert "State:\tS" in status, status  # asleep: not stopped (T), not traced (t)
    assert "rlmx-pwn" not in Path("/proc/self/mountinfo").read_text()
    assert not left_behind(chost), "processes of the run outlived it"
    assert _processes_with(f"rlmx-daemon-{chost.token}") == []
    assert len(out.requests) <= MAX_LLM_CALLS


@pytest.mark.parametrize("attack", LANDLOCK_ATTACKS, ids=[a.id for a in LANDLOCK_ATTACKS])
def test_landlock_attack_is_contained(chost: ContainerHost, attack: Attack) -> None:
    chost.namespaces.clear()
    code = string.Template(attack.code).substitute(chost.fields())
    out = run(chost, code, dataclasses.replace(SETTINGS, **attack.settings), snoop_namespaces(chost))
    assert_host_untouched(chost, out)
    assert out.result.stopped_by == "final", out.result.error
    assert out.continued, out.said_after(1)
    if attack.said:
        said = out.said_after(1)
        assert any(s in said for s in attack.said), said[:3000]
    if attack.id == "ll-ctypes-syscalls":
        assert len(chost.namespaces) >= 3, "the cell's CHECK-NAMESPACES call never reached the host"
        mine = _namespaces("self")
        odd = {pid: ns for pid, ns in chost.namespaces.items() if any(mine[k] != v for k, v in ns.items())}
        assert not odd, (mine, odd)
    if attack.id == "ll-scratch-cap":  # the monitor removed the scratch: no chunk is left on the disk
        assert not list(Path(tempfile.gettempdir()).glob(f"rlmx-confine-*/*/chunk-{chost.token}-*"))


def _with_second_run(
    chost: ContainerHost, first_code: str, second_code: str, ready: str, second_timeout_s: float
) -> tuple[Outcome, Outcome]:
    """Run B (`second_code`, its cells stopped after `second_timeout_s`) in a thread; once B's cell
    calls llm_query(`ready`), run A (`first_code`) beside it. Returns (A, B)."""
    started, outcomes = threading.Event(), {}

    def hook(prompt: str) -> None:
        if ready in prompt:
            started.set()

    def second() -> None:
        try:
            outcomes["b"] = run(
                chost, second_code, dataclasses.replace(SETTINGS, cell_timeout_s=second_timeout_s), hook
            )
        finally:
            started.set()

    thread = threading.Thread(target=second)
    thread.start()
    assert started.wait(120)
    outcomes["a"] = run(chost, first_code, SETTINGS)
    thread.join(180)
    assert not thread.is_alive()
    return outcomes["a"], outcomes["b"]


SURVIVOR = "import time\nllm_query('B-READY')\ntime.sleep(8)\nprint('B-SURVIVED')"
KILL_ALL = """
import os, signal
me, sent = os.getpid(), 0
for pid in range(2, 65536):
    if pid != me:
        try:
            os.kill(pid, signal.SIGKILL)
            sent += 1
        except OSError:
            pass
print('signals delivered:', sent)
os.kill(-1, signal.SIGKILL)
"""


def test_killing_every_pid_spares_another_runs_worker_and_the_host(chost: ContainerHost) -> None:
    a, b = _with_second_run(chost, KILL_ALL, SURVIVOR, "B-READY", 20.0)
    for out in (a, b):
        assert_host_untouched(chost, out)
        assert out.result.stopped_by == "final" and out.continued, out.result.error
    assert "B-SURVIVED" in b.said_after(1), b.said_after(1)


BOMB = "import os\nllm_query('BOMB-STARTS')\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"


def test_a_fork_bomb_leaves_another_run_working(chost: ContainerHost) -> None:
    ordinary, bomb = _with_second_run(chost, f"print('{STILL_HERE}-A')", BOMB, "BOMB-STARTS", 10.0)
    for out in (ordinary, bomb):
        assert_host_untouched(chost, out)
        assert out.result.stopped_by == "final" and out.continued, out.result.error
    assert f"{STILL_HERE}-A" in ordinary.said_after(1)  # it ran its cell while the bomb went off
    assert any(s in bomb.said_after(1) for s in ("TimeoutError", "CPUTimeExceeded")), bomb.said_after(1)
