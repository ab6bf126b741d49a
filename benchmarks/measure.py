"""Measuring instruments shared by the benchmarks: a driver process with its process tree's peak PSS,
per-turn gaps seen at the server, floors of scripted runs, medians."""

from __future__ import annotations

import itertools
import json
import math
import os
import statistics
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.serve import Served

ROOT = Path(__file__).resolve().parent.parent
RESULT_PREFIX = "RESULT "


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (through /proc/PID/task/TID/children)."""
    out, stack = [], [pid]
    while stack:
        current = stack.pop()
        out.append(current)
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{current}/task/{tid}/children") as f:
                    stack.extend(int(c) for c in f.read().split())
            except OSError:
                continue
    return out


def pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreeSampler:
    """Samples the PSS summed over a process tree every `interval` seconds; keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.pid, self.interval = pid, interval
        self.peak_kb = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            total = sum(pss_kb(p) for p in descendants(self.pid))
            self.peak_kb = max(self.peak_kb, total)
            self.samples += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class DriverRun:
    result: dict[str, Any]  # what the driver printed (call_s, answer, ...)
    process_s: float  # the driver process from spawn to exit
    peak_pss_mb: float | None = None
    stderr_tail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def run_driver(
    command: Sequence[str], spec: dict[str, Any], *, sample_memory: bool = False, timeout: float = 900
) -> DriverRun:
    """Run one driver process (`command` + JSON spec); it prints `RESULT {json}` as its last word."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("PYTHONPATH", None)
    started = time.monotonic()
    proc = subprocess.Popen(
        [*command, json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    sampler = TreeSampler(proc.pid) if sample_memory else None
    if sampler:
        sampler.__enter__()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    finally:
        if sampler:
            sampler.__exit__()
    process_s = time.monotonic() - started
    line = next((ln for ln in reversed(out.splitlines()) if ln.startswith(RESULT_PREFIX)), None)
    result = json.loads(line[len(RESULT_PREFIX) :]) if line else {"error": f"exit {proc.returncode}"}
    peak = sampler.peak_kb / 1024 if sampler else None
    return DriverRun(result, process_s, peak, err[-1500:])


# --- what the server saw ------------------------------------------------------------------------------


def root_gaps_ms(requests: list[Served]) -> list[float]:
    """Client-side time between replying to one root request and receiving the next (ms)."""
    roots = sorted((r for r in requests if r.root), key=lambda r: r.t_received)
    return [(b.t_received - a.t_replied) * 1000 for a, b in itertools.pairwise(roots)]


def sub_span_s(requests: list[Served]) -> float:
    """From the first sub-call received to the last one replied."""
    subs = [r for r in requests if not r.root]
    return max(r.t_replied for r in subs) - min(r.t_received for r in subs) if subs else 0.0


def batches(requests: list[Served]) -> list[int]:
    """Sizes of the groups of sub-calls made between two root turns."""
    sizes: list[int] = []
    current = 0
    for r in sorted(requests, key=lambda r: r.t_received):
        if r.root:
            if current:
                sizes.append(current)
            current = 0
        else:
            current += 1
    if current:
        sizes.append(current)
    return sizes


def batch_start_ms(requests: list[Served]) -> float | None:
    """From the root reply that asked for the batch to the first sub-call received, at the server."""
    subs = [r.t_received for r in requests if not r.root]
    if not subs:
        return None
    replies = [r.t_replied for r in requests if r.root and r.t_replied <= min(subs)]
    return (min(subs) - max(replies)) * 1000 if replies else None


def shape(requests: list[Served]) -> list[int]:
    """The run as groups in time order: 1 for each root turn, n for the n sub-calls between two."""
    groups: list[int] = []
    in_batch = False
    for r in sorted(requests, key=lambda r: r.t_received):
        if not r.root and in_batch:
            groups[-1] += 1
        else:
            groups.append(1)
        in_batch = not r.root
    return groups


def floor_s(requests: list[Served], concurrency: int, latency: float) -> float:
    """(root turns + sum of ceil(batch / concurrency)) x latency."""
    roots = sum(1 for r in requests if r.root)
    return (roots + sum(math.ceil(b / concurrency) for b in batches(requests))) * latency


def list_schedule_s(latencies: Sequence[float], concurrency: int) -> float:
    """Makespan of running `latencies` in order on `concurrency` slots, each taking the next free one."""
    slots = [0.0] * min(concurrency, max(1, len(latencies)))
    for value in latencies:
        i = min(range(len(slots)), key=slots.__getitem__)
        slots[i] += value
    return max(slots) if latencies else 0.0


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def load_note() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def compile_like_an_install() -> None:
    """Write rlmx's bytecode before measuring, as `pip install` does for the peers' packages. A checkout
    installed in editable mode under PYTHONDONTWRITEBYTECODE=1 (this machine's default) would otherwise
    compile every rlmx module from source in each driver, zygote and worker process it starts."""
    import compileall

    compileall.compile_dir(str(ROOT / "src" / "rlmx"), quiet=1)
