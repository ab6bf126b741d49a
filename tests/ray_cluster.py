"""A real two-node Ray cluster on this one machine, for tests.

`RayCluster` runs `ray start --head --block` and `ray start --address ... --block` as its own
subprocesses (each in its own session and process group), waits until the GCS reports both nodes
alive, and on `stop()` kills exactly the processes it started: the two `ray start` processes, every
descendant of theirs (collected before anything is killed), and every process that carries this
cluster's marker in its environment or its temp dir in its command line (Ray's workers and agents
inherit the environment of `ray start`, even after they are re-parented). It never runs `ray stop`,
never kills by name, and deletes nothing outside its own temp dir.

    with RayCluster(worker_resources={"worker_slot": 4}) as cluster:
        ray.init(address=cluster.address)
        ...
        ray.shutdown()

Notes on Ray 2.60 (see the probe findings):
- `ray start --node-ip-address 127.0.0.1` is rewritten by Ray to the host's routable address
  (`services.resolve_ip_for_localhost`), so the nodes register as e.g. 192.0.2.2 and the GCS listens on
  all interfaces; `address` is still "127.0.0.1:PORT", which reaches that GCS. `node_ip` is the
  address Ray registered.
- Token authentication: `RAY_AUTH_MODE=disabled` is the switch (ray/_private/authentication/
  authentication_token_setup.py); it is set for the cluster processes and returned by `driver_env()`.
- Two raylets share the temp dir; Ray gives their log files and sockets unique names (raylet.out,
  raylet.1.out, ...), so `session_dir()` holds the logs of both nodes. `stop()` deletes the temp dir
  unless `keep_temp_dir=True` (then the caller removes `temp_dir`): grep the logs before `stop()`.
- A Ray worker can outlive its raylet, re-parented to PID 1 (seen when the `ray start` of its node is
  not there to clean up); that is why `stop()` also looks for the marker in every process's environment.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

VENV_BIN = Path(sys.executable).parent
RAY = str(VENV_BIN / "ray")
MARKER_VAR = "RLMX_TEST_RAY_CLUSTER"
NODES = ("head", "worker")

# The environment every process of the cluster gets (on top of the caller's, minus RAY_ADDRESS).
QUIET_ENV = {
    "RAY_AUTH_MODE": "disabled",  # Ray 2.60 would otherwise turn token auth on for new local clusters
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_USAGE_STATS_PROMPT_ENABLED": "0",
    # The minimal `ray` install has no metrics agent; without this the GCS and raylets retry to reach one
    # and then log "Failed to establish connection to the metrics exporter agent" (also shown by drivers).
    "RAY_enable_metrics_collection": "0",
}

# Lines in a GCS or raylet log that mean the process could not start (a port taken since it was picked).
FATAL_LOG_MARKERS = ("Failed to start the grpc server", "Address already in use")

# Runs in a short-lived subprocess: waits until `want` nodes are ALIVE in the GCS, prints them as JSON.
_WAIT_NODES = r"""
import json, sys, time
from ray._raylet import GcsClient
from ray.core.generated.gcs_pb2 import GcsNodeInfo
address, want, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + timeout
last = "no answer from the GCS yet"
client = None
while time.monotonic() < deadline:
    try:
        if client is None:
            client = GcsClient(address=address)
        infos = client.get_all_node_info(timeout=5)
        alive = [i for i in infos.values() if i.state == GcsNodeInfo.GcsNodeState.ALIVE]
        last = f"{len(alive)} alive of {len(infos)}"
        if len(alive) >= want:
            print(json.dumps([
                {"node_id": i.node_id.hex(), "is_head": i.is_head_node, "ip": i.node_manager_address,
                 "node_manager_port": i.node_manager_port, "resources": dict(i.resources_total)}
                for i in alive
            ]))
            sys.exit(0)
    except Exception as exc:
        last = f"{type(exc).__name__}: {exc}"
    time.sleep(0.2)
print(f"timed out after {timeout}s waiting for {want} alive nodes: {last}", file=sys.stderr)
sys.exit(3)
"""


# ---------------------------------------------------------------------------------------------------
# /proc helpers (Linux). A process is identified by (pid, start time) so that a recycled PID is never
# mistaken for one of ours.


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgid, starttime) of a process, or None if it is gone."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    rest = data[data.rindex(")") + 2 :].split()
    return rest[0], int(rest[1]), int(rest[2]), int(rest[19])


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _has_env(pid: int, needle: bytes) -> bool:
    try:
        return needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _alive(pid: int, start: int) -> bool:
    """True while this very process exists and is not a zombie."""
    st = _stat(pid)
    return st is not None and st[3] == start and st[0] not in ("Z", "X")


def _descendants(roots: Iterable[int]) -> dict[int, int]:
    """{pid: starttime} of `roots` and everything below them."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for pid in _all_pids():
        st = _stat(pid)
        if st is None:
            continue
        starts[pid] = st[3]
        children.setdefault(st[1], []).append(pid)
    found: dict[int, int] = {}
    todo = [p for p in roots if p in starts]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found[pid] = starts[pid]
        todo.extend(children.get(pid, ()))
    return found


def still_alive(procs: Mapping[int, int]) -> list[int]:
    """The PIDs of `procs` ({pid: starttime}, as `RayCluster.processes()` returns) that still run."""
    return sorted(pid for pid, start in procs.items() if _alive(pid, start))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _free_range(size: int, taken: set[int]) -> int:
    """First port of `size` consecutive free ports below the ephemeral range (32768+)."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 32000 - size)
        ports = range(base, base + size)
        if not taken.intersection(ports) and all(_port_free(p) for p in ports):
            return base
    raise RuntimeError(f"no {size} consecutive free ports found")


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


class RayClusterError(RuntimeError):
    pass


class RayCluster:
    """A head node and a second node started with `ray start --block`; see the module docstring."""

    def __init__(
        self,
        *,
        worker_resources: Mapping[str, float] | None = None,
        head_resources: Mapping[str, float] | None = None,
        num_cpus: int = 1,
        object_store_memory: int = 200_000_000,
        env: Mapping[str, str] | None = None,
        worker_env: Mapping[str, str] | None = None,
        worker_prefix: Sequence[str] = (),
        start_timeout: float = 60.0,
        keep_temp_dir: bool = False,
        start: bool = True,
    ) -> None:
        self.worker_resources = dict(worker_resources or {})
        self.head_resources = dict(head_resources or {})
        self.num_cpus = num_cpus
        self.object_store_memory = object_store_memory
        self.extra_env = dict(env or {})
        self.worker_env = dict(worker_env or {})
        # argv the second node's `ray start` runs under (e.g. the container launcher, tests/container_support.py)
        self.worker_prefix = list(worker_prefix)
        self.start_timeout = start_timeout
        self.keep_temp_dir = keep_temp_dir
        self.tag = uuid.uuid4().hex[:12]
        # Short on purpose: Ray's unix sockets live under it and a socket path must stay under 108 bytes.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="rayc-", dir="/tmp"))
        self.port = 0
        self.node_ip = ""
        self.timings: dict[str, float] = {}
        self.nodes: dict[str, dict[str, object]] = {}
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._seen: dict[int, int] = {}  # every cluster process ever observed: pid -> starttime
        self._stopped = False
        if start:
            self.start()

    # ------------------------------------------------------------------ public API

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def session_dir(self) -> Path:
        """The session folder (session_latest resolved) under this cluster's temp dir."""
        latest = self.temp_dir / "session_latest"
        return latest.resolve() if latest.exists() else latest

    def node_ids(self) -> dict[str, str]:
        return {name: str(info["node_id"]) for name, info in self.nodes.items()}

    def env(self) -> dict[str, str]:
        """The environment the `ray start` processes get."""
        env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS",)}
        env.update(QUIET_ENV)
        env.update(self.extra_env)
        env[MARKER_VAR] = self.tag
        return env

    def driver_env(self) -> dict[str, str]:
        """Environment for a driver subprocess that connects to this cluster (no marker: not ours to kill)."""
        env = {k: v for k, v in os.environ.items() if k != MARKER_VAR}
        env.update(QUIET_ENV)
        env["RAY_ADDRESS"] = self.address
        return env

    def block_pid(self, node: str) -> int:
        """PID of the `ray start --block` process of `node` ("head" or "worker")."""
        return self._procs[node].pid

    def raylet_pid(self, node: str) -> int:
        """PID of the raylet of `node`, found among the descendants of its `ray start --block`."""
        want = f"--node_id={self.nodes[node]['node_id']}" if node in self.nodes else ""
        for pid in _descendants([self.block_pid(node)]):
            cmd = _cmdline(pid)
            if cmd.split(" ", 1)[0].endswith("/raylet") and want in cmd:
                return pid
        raise RayClusterError(f"no raylet process found under the {node} node (pid {self.block_pid(node)})")

    def kill_raylet(self, node: str) -> int:
        """SIGKILL the raylet of `node`; returns its PID. Its `ray start --block` then kills the rest."""
        pid = self.raylet_pid(node)
        self._track()
        os.kill(pid, signal.SIGKILL)
        return pid

    def processes(self) -> dict[int, int]:
        """{pid: starttime} of every live process of this cluster (tree of the block processes + marked)."""
        found = _descendants(p.pid for p in self._procs.values())
        needle = f"{MARKER_VAR}={self.tag}".encode()
        temp = str(self.temp_dir)
        for pid in _all_pids():
            if pid in found or pid == os.getpid():
                continue
            cmd = _cmdline(pid)  # NUL-separated arguments joined with spaces, so it ends with a space
            if _has_env(pid, needle) or f"{temp}/" in cmd or f"{temp} " in cmd:
                st = _stat(pid)
                if st is not None:
                    found[pid] = st[3]
        return {pid: start for pid, start in found.items() if _alive(pid, start)}

    def rss_bytes(self) -> int:
        return sum(_rss_bytes(pid) for pid in self.processes())

    def describe_processes(self) -> list[str]:
        return [f"{pid} {_cmdline(pid)[:160]}" for pid in sorted(self.processes())]

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> RayCluster:
        if self._procs:
            raise RayClusterError("this RayCluster was started already")
        atexit.register(self._stop_at_exit)
        try:
            for attempt in range(3):  # a port picked free can be taken before Ray binds it: retry, new ports
                try:
                    self._start_once()
                    return self
                except RayClusterError as exc:
                    text = str(exc).lower()
                    if attempt == 2 or not any(m in text for m in ("already in use", "failed to bind")):
                        raise
                    self._kill_everything(grace=2)
                    self._procs.clear()
                    self.nodes.clear()
                    for old in self.temp_dir.glob("session_*"):  # the failed attempt's logs and sockets
                        if old.is_symlink():
                            old.unlink()
                        else:
                            shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            self.stop()  # also on KeyboardInterrupt: never leave a half-started cluster behind
            raise
        raise AssertionError("unreachable")

    def stop(self, grace: float = 10.0) -> None:
        """Terminate every process this cluster started; raise if any of them is still alive after."""
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self._stop_at_exit)
        survivors = self._kill_everything(grace)
        if not self.keep_temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
        if survivors:
            raise RayClusterError(f"processes of the Ray cluster survived stop(): {survivors}")

    def _stop_at_exit(self) -> None:
        try:
            self.stop(grace=3)
        except RayClusterError as exc:
            print(f"ray_cluster: {exc}", file=sys.stderr)

    def __enter__(self) -> RayCluster:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ internals

    def _ports(self, head: bool) -> dict[str, int]:
        taken: set[int] = set()
        names = [
            "node-manager-port",
            "object-manager-port",
            "dashboard-agent-listen-port",
            "dashboard-agent-grpc-port",
            "runtime-env-agent-port",
            "metrics-export-port",
        ]
        if head:
            # No --ray-client-server-port: passing it fails unless ray[client] is installed (and the
            # client server is not started without it).
            names += ["port", "dashboard-port"]
        ports: dict[str, int] = {}
        for name in names:
            port = _free_port()
            while port in taken:
                port = _free_port()
            taken.add(port)
            ports[name] = port
        base = _free_range(30, taken)
        ports["min-worker-port"], ports["max-worker-port"] = base, base + 29
        return ports

    def _command(self, node: str) -> list[str]:
        head = node == "head"
        cmd = [
            RAY,
            "start",
            "--block",
            "--num-cpus",
            str(self.num_cpus),
            "--node-ip-address",
            "127.0.0.1",
            "--temp-dir",
            str(self.temp_dir),
            "--object-store-memory",
            str(self.object_store_memory),
            "--disable-usage-stats",
            "--log-style",
            "record",
            "--log-color",
            "false",
        ]
        ports = self._ports(head)
        if head:
            self.port = ports["port"]
            cmd += ["--head", "--include-dashboard=false", "--dashboard-host", "127.0.0.1"]
        else:
            # One log monitor per host is enough (the head's watches the shared session dir).
            cmd += ["--address", self.address, "--include-log-monitor=false"]
        for name, port in ports.items():
            cmd += [f"--{name}", str(port)]
        resources = self.head_resources if head else self.worker_resources
        if resources:
            cmd += ["--resources", json.dumps(resources)]
        return cmd

    def _spawn(self, node: str) -> None:
        env = self.env()
        if node == "worker":
            env.update(self.worker_env)
        out = open(self.temp_dir / f"ray-start-{node}.log", "wb")  # the child keeps its own copy
        try:
            self._procs[node] = subprocess.Popen(
                (self.worker_prefix if node == "worker" else []) + self._command(node),
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.temp_dir,
            )
        finally:
            out.close()
        self._track()

    def _wait_nodes(self, want: int) -> list[dict[str, object]]:
        deadline = time.monotonic() + self.start_timeout
        waiter = subprocess.Popen(
            [sys.executable, "-c", _WAIT_NODES, self.address, str(want), str(self.start_timeout)],
            env=self.driver_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            while True:
                try:
                    out, err = waiter.communicate(timeout=0.25)
                    break
                except subprocess.TimeoutExpired:
                    pass
                self._track()
                for name, proc in self._procs.items():
                    if proc.poll() is not None:
                        raise RayClusterError(
                            f"`ray start` of the {name} node exited with {proc.returncode} while waiting for "
                            f"{want} nodes\n{self._log_tails()}"
                        )
                fatal = self._fatal_log_line()
                if fatal:  # e.g. a port taken since it was picked: Ray itself would wait ~40 s to give up
                    raise RayClusterError(f"a Ray process failed to start: {fatal}\n{self._log_tails()}")
                if time.monotonic() > deadline + 10:
                    raise RayClusterError(f"timed out waiting for {want} nodes\n{self._log_tails()}")
        finally:
            if waiter.poll() is None:
                waiter.kill()
                waiter.wait()
        if waiter.returncode != 0:
            raise RayClusterError(
                f"waiting for {want} alive nodes failed: {err.decode(errors='replace').strip()[-2000:]}\n"
                f"{self._log_tails()}"
            )
        return json.loads(out)

    def _start_once(self) -> None:
        t0 = time.monotonic()
        self._spawn("head")
        nodes = self._wait_nodes(1)
        self.timings["head_s"] = time.monotonic() - t0
        head = next(n for n in nodes if n["is_head"])
        self.nodes["head"] = head
        self.node_ip = str(head["ip"])
        t1 = time.monotonic()
        self._spawn("worker")
        nodes = self._wait_nodes(2)
        self.timings["worker_s"] = time.monotonic() - t1
        self.timings["total_s"] = time.monotonic() - t0
        others = [n for n in nodes if n["node_id"] != head["node_id"]]
        if len(others) != 1:
            raise RayClusterError(f"expected exactly one node besides the head, got {nodes}")
        self.nodes["worker"] = others[0]
        self._track()

    def _track(self) -> dict[int, int]:
        live = self.processes()
        self._seen.update(live)
        return live

    def _kill_everything(self, grace: float = 10.0) -> list[str]:
        self._track()
        # Graceful first: SIGTERM makes `ray start --block` shut its node down.
        for proc in self._procs.values():
            if proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        for proc in self._procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        # Then SIGKILL whatever is left, by PID, until nothing of ours is alive (or give up after 5 s).
        deadline = time.monotonic() + 5
        while True:
            self._track()
            alive = {pid: start for pid, start in self._seen.items() if _alive(pid, start)}
            if not alive:
                break
            if time.monotonic() > deadline:
                return [f"{pid} {_cmdline(pid)[:160]}" for pid in sorted(alive)]
            for pid, start in alive.items():
                if _alive(pid, start):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            for proc in self._procs.values():
                if proc.poll() is None:
                    try:
                        proc.wait(timeout=0.1)
                    except subprocess.TimeoutExpired:
                        pass
            time.sleep(0.1)
        for proc in self._procs.values():
            if proc.poll() is None:
                proc.wait()
        return []

    def _fatal_log_line(self) -> str | None:
        for path in self.temp_dir.glob("session_2*/logs/*"):
            if not (path.name.startswith(("gcs_server", "raylet")) and path.suffix in (".out", ".err")):
                continue
            try:
                with path.open("rb") as f:
                    f.seek(max(0, path.stat().st_size - 16384))
                    text = f.read().decode(errors="replace")
            except OSError:
                continue
            for line in text.splitlines():
                if any(marker in line for marker in FATAL_LOG_MARKERS):
                    return f"{path.name}: {line.strip()[:600]}"
        return None

    def _log_tails(self) -> str:
        parts = []
        for node in NODES:
            parts.append(f"--- ray start ({node}) ---\n{_tail(self.temp_dir / f'ray-start-{node}.log')}")
        logs = self.session_dir() / "logs"
        if logs.is_dir():
            for path in sorted(logs.glob("*")):
                if path.name.startswith(("raylet", "gcs_server")) and path.suffix in (".out", ".err"):
                    text = _tail(path, 10)
                    if text:
                        parts.append(f"--- {path.name} ---\n{text}")
        return "\n".join(parts)
