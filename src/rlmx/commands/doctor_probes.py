"""The live part of `rlmx doctor`: a real worker of the chosen sandbox backend, and one cell in it that
tries to reach what model code must not (a TCP listener the doctor opens, the user's home, other
processes, /etc/shadow). Each probe is judged here, on the host's side: the cell reports raw facts
(what it could open, list, signal), the host compares them with its own state (did a connection
arrive, is that directory the same inode, is that process the doctor)."""

from __future__ import annotations

import asyncio
import json
import os
import select
import socket
import stat
from dataclasses import dataclass, field
from typing import Any

PROBES = ("network", "home", "processes", "shadow")
MARK = "RLMX-DOCTOR "
SHADOW = "/etc/shadow"

# The cell: `_a` holds the doctor's parameters (the cell sees no host path but those it is given).
CELL = """
import json as _j, os as _o, socket as _s
_a = _j.loads(%r)
_r = {}
def _e(x):
    return f"{type(x).__name__}: {x.strerror or x}" if isinstance(x, OSError) else f"{type(x).__name__}: {x}"
def _start(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except Exception:
        return None
if "network" in _a["probes"]:
    try:
        _c = _s.create_connection(("127.0.0.1", _a["port"]), timeout=2)
        _c.close()
        _r["network"] = {"connected": True}
    except Exception as x:
        _r["network"] = {"connected": False, "error": _e(x)}
if "home" in _a["probes"]:
    _h = _r["home"] = {}
    try:
        _st = _o.stat(_a["home"])
        _h["id"] = [_st.st_dev, _st.st_ino]
        _h["entries"] = len(_o.listdir(_a["home"]))
    except Exception as x:
        _h["error"] = _e(x)
    if _a["file"]:
        try:
            with open(_a["file"], "rb") as f:
                f.read(1)
            _h["read"] = True
        except Exception as x:
            _h["read_error"] = _e(x)
if "processes" in _a["probes"]:
    _p = _r["processes"] = {"own_pid": _o.getpid()}
    try:
        _o.kill(_a["pid"], 0)
        _p["signalled"] = True
    except Exception as x:
        _p["kill_error"] = _e(x)
    try:
        _ps = [n for n in _o.listdir("/proc") if n.isdigit()]
        _p["listed"] = str(_a["pid"]) in _ps
        _p["count"] = len(_ps)
    except Exception as x:
        _p["list_error"] = _e(x)
    _p["start"] = _start(_a["pid"])
if "shadow" in _a["probes"]:
    try:
        with open(_a["shadow"], "rb") as f:
            f.read(1)
        _r["shadow"] = {"read": True}
    except Exception as x:
        _r["shadow"] = {"read": False, "error": _e(x)}
print(%r + _j.dumps(_r))
"""


@dataclass
class Probe:
    blocked: bool
    detail: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_data(self) -> dict[str, Any]:
        return {"blocked": self.blocked, "detail": self.detail, **self.extra}


@dataclass
class Live:
    """What the doctor learned from a real worker: its isolation report and the probes' verdicts."""

    backend: str
    isolation: dict[str, Any]
    probes: dict[str, Probe]


def home_dir() -> str:
    return os.path.realpath(os.path.expanduser("~"))


def start_time(pid: int | str) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def a_readable_file(home: str) -> str | None:
    """A regular file directly in `home` that the host can read (the cell tries to read it too)."""
    try:
        names = sorted(os.listdir(home))
    except OSError:
        return None
    for name in names:
        path = os.path.join(home, name)
        try:
            if stat.S_ISREG(os.lstat(path).st_mode) and os.access(path, os.R_OK):
                return path
        except OSError:
            continue
    return None


class Host:
    """The host's side of the probes: the listener, the paths, the doctor's pid and its start time."""

    def __init__(self) -> None:
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.home = home_dir()
        self.file = a_readable_file(self.home)
        self.pid = os.getpid()
        self.start = start_time("self")

    def code(self, probes: tuple[str, ...]) -> str:
        args = {
            "probes": list(probes),
            "port": self.port,
            "home": self.home,
            "file": self.file,
            "pid": self.pid,
            "shadow": SHADOW,
        }
        return CELL % (json.dumps(args), MARK)

    def connection_arrived(self, wait_s: float = 0.2) -> bool:
        ready, _, _ = select.select([self.listener], [], [], wait_s)
        if not ready:
            return False
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True

    def close(self) -> None:
        self.listener.close()

    # --- verdicts -------------------------------------------------------------------------------------
    def judge(self, name: str, seen: dict[str, Any]) -> Probe:
        return {
            "network": self._network,
            "home": self._home,
            "processes": self._processes,
            "shadow": self._shadow,
        }[name](seen)

    def _network(self, seen: dict[str, Any]) -> Probe:
        arrived = self.connection_arrived()
        where = f"127.0.0.1:{self.port}, a listener of the doctor"
        if arrived or seen.get("connected"):
            how = "a connection arrived" if arrived else "the cell connected"
            return Probe(False, f"REACHABLE: {how} ({where})")
        return Probe(True, f"blocked: no connection reached {where} ({seen.get('error', 'no detail')})")

    def _home(self, seen: dict[str, Any]) -> Probe:
        extra = {"path": self.home}
        try:
            st = os.stat(self.home)
        except OSError as exc:
            return Probe(True, f"out of reach: not on this host ({exc.strerror})", extra)
        same = seen.get("id") == [st.st_dev, st.st_ino]
        if same and "entries" in seen:
            return Probe(False, f"REACHABLE: the cell listed it ({seen['entries']} entries)", extra)
        if seen.get("read"):
            return Probe(False, f"REACHABLE: the cell read {self.file}", extra)
        if "error" in seen:
            why = seen["error"]
        elif same:
            why = "the cell could not list it"
        else:
            n = seen.get("entries", 0)
            why = f"the cell sees another directory there ({n} entr{'y' if n == 1 else 'ies'} of its own)"
        if self.file and "read_error" in seen:
            why += f"; reading {os.path.basename(self.file)}: {seen['read_error']}"
        return Probe(True, f"out of reach: {why}", extra)

    def _processes(self, seen: dict[str, Any]) -> Probe:
        extra = {"pid": self.pid}
        # the same pid number in the worker's own PID namespace is another process: compare start times
        theirs = seen.get("start")
        is_doctor = theirs is None or theirs == self.start
        signalled = bool(seen.get("signalled")) and is_doctor
        listed = bool(seen.get("listed")) and is_doctor
        if signalled or listed:
            how = " and ".join(w for w, yes in (("signalled", signalled), ("listed", listed)) if yes)
            return Probe(False, f"REACHABLE: the cell {how} the doctor (pid {self.pid})", extra)
        kill = seen.get("kill_error", "the pid there is another process")
        if "list_error" in seen:
            proc = f"/proc: {seen['list_error']}"
        else:
            proc = f"/proc shows {seen.get('count', 0)} process(es) of the worker's own PID namespace"
        return Probe(True, f"blocked: kill({self.pid}, 0): {kill}; {proc}", extra)

    def _shadow(self, seen: dict[str, Any]) -> Probe:
        if not os.path.exists(SHADOW):
            return Probe(True, "out of reach: not on this host")
        if seen.get("read"):
            return Probe(False, "REACHABLE: the cell read it")
        return Probe(True, f"out of reach: {seen.get('error', 'no detail')}")


def _parse(output: str) -> dict[str, Any] | None:
    for line in reversed(output.splitlines()):
        if line.startswith(MARK):
            data = json.loads(line[len(MARK) :])
            return data if isinstance(data, dict) else None
    return None


async def _no_rpc(method: str, params: dict[str, Any]) -> Any:
    from rlmx.errors import RLMError

    raise RLMError(f"rlmx doctor answers no {method}")


def make_sandbox(settings: Any) -> Any:
    if settings.backend == "local":
        from rlmx.sandbox.in_process import InProcessSandbox

        return InProcessSandbox(settings)
    from rlmx.sandbox.process import ProcessSandbox

    return ProcessSandbox(settings)


def isolation_of(sandbox: Any) -> dict[str, Any]:
    if hasattr(sandbox, "isolation"):
        return dict(sandbox.isolation())
    return {"layer": "local", "worker_ids": "none", "unavailable": {}, "notes": ["in this process"]}


async def run_probes(sandbox: Any, host: Host) -> dict[str, Probe]:
    """One cell for every probe; if it does not report (the worker was killed for something it
    tried), each probe again in a cell of its own: the one whose worker dies was blocked by that."""
    result = await sandbox.execute(host.code(PROBES), _no_rpc)
    seen = _parse(result.output)
    if seen is not None and set(seen) >= set(PROBES):
        return {name: host.judge(name, seen[name]) for name in PROBES}
    probes: dict[str, Probe] = {}
    for name in PROBES:
        one = await sandbox.execute(host.code((name,)), _no_rpc)
        got = _parse(one.output)
        if got is not None and name in got:
            probes[name] = host.judge(name, got[name])
        elif one.restarted and (name != "network" or not host.connection_arrived()):
            probes[name] = Probe(True, f"blocked: the worker was stopped when it tried ({one.error})")
        else:
            probes[name] = Probe(False, f"unknown: the probe did not report ({one.error or one.output!r})")
    return probes


async def live(settings: Any) -> Live:
    """Start a real worker of `settings.backend`, read the layer it got, probe it, close it. Raises
    what the sandbox raises when it cannot start (SandboxUnavailable: no layer can be built)."""
    from rlmx.context.payload import ContextPayload

    host = Host()
    sandbox = make_sandbox(settings)
    try:
        await sandbox.start(ContextPayload("inline-text", b"rlmx doctor"))
        probes = await run_probes(sandbox, host)
        return Live(settings.backend, isolation_of(sandbox), probes)
    finally:
        try:
            await sandbox.close()
        finally:
            host.close()


def probe_live(settings: Any) -> Live:
    return asyncio.run(live(settings))
