"""The scripted model server of the benchmarks, in a process of its own.

Run in-process, the server's threads would share one GIL with the client under test and the benchmark
would measure their contention (1,000 requests at 64 in flight: 2.5x the ideal time in-process, 1.15x
with the server in its own process). So `ServerProcess` starts `python -m benchmarks.serve SPEC` and
talks to it over stdin/stdout: the child prints its URL, then answers one JSON line per command
(`requests`, `reset`); closing stdin stops it. Timestamps are `time.monotonic()`, which is one clock for
all processes on Linux, so they compare with the client's.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Served:
    """One request as the server saw it."""

    index: int
    root: bool
    t_received: float
    t_replied: float
    latency: float  # the latency the server was told to add
    chars: int  # characters of message content received


def lognormal_latency(spec: dict[str, Any]) -> tuple[Any, dict[int, float]]:
    """Log-normal latencies, deterministic per request content: (latency function, drawn values)."""
    from benchmarks.policies import is_root

    drawn: dict[int, float] = {}
    seed, sigma, scale = spec.get("seed", 0), spec.get("sigma", 0.7), spec.get("scale", 1.0)

    def latency(request: Any) -> float:
        messages = request.messages
        root = is_root(messages, request)
        key = zlib.crc32(f"{seed}:{len(messages)}:{messages[-1]['content'] if messages else ''}".encode())
        median = spec["root_median"] if root else spec["sub_median"]
        value = random.Random(key).lognormvariate(math.log(median), sigma) * scale
        drawn[request.index] = value
        return value

    return latency, drawn


def serve(spec: dict[str, Any]) -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks.policies import is_root, make_policy
    from rlmx.testing import ScriptedServer

    policy = make_policy(spec["framework"], spec["scenario"], **spec.get("params", {}))
    lat = spec.get("latency", 0.0)
    drawn: dict[int, float] = {}
    if isinstance(lat, dict):
        latency, drawn = lognormal_latency(lat)
    else:
        latency = float(lat)
    with ScriptedServer(policy, latency=latency) as srv:
        print(srv.url, flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "reset":
                srv.reset()
                drawn.clear()
                print("{}", flush=True)
            elif command == "requests":
                rows = [
                    {
                        "index": r.index,
                        "root": is_root(r.messages, r),
                        "t_received": r.t_received,
                        "t_replied": r.t_replied or 0.0,
                        "latency": drawn.get(r.index, latency if isinstance(latency, float) else 0.0),
                        "chars": sum(len(m["content"]) for m in r.messages),
                        "error": r.error,
                    }
                    for r in srv.requests
                ]
                print(json.dumps(rows), flush=True)
            else:
                print(json.dumps({"error": f"unknown command {command!r}"}), flush=True)


class ServerProcess:
    """`with ServerProcess(framework, scenario, latency=0.1) as srv: srv.url; srv.requests()`."""

    def __init__(
        self, framework: str, scenario: str, *, latency: float | dict[str, Any] = 0.0, **params: Any
    ) -> None:
        self.spec = {"framework": framework, "scenario": scenario, "latency": latency, "params": params}
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> ServerProcess:
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.serve", json.dumps(self.spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http"):
            raise RuntimeError(f"benchmark server failed to start (said {self.url!r})")
        return self

    def _ask(self, command: str) -> Any:
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def requests(self) -> list[Served]:
        return [
            Served(r["index"], r["root"], r["t_received"], r["t_replied"], r["latency"], r["chars"])
            for r in self._ask("requests")
        ]

    def reset(self) -> None:
        self._ask("reset")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


if __name__ == "__main__":
    serve(json.loads(sys.argv[1]))
