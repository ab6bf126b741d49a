"""Child REPLs: forked from the run's zygote vs started fresh -- start time and memory.

    .venv/bin/python -m benchmarks.sandbox_children [--mb 40] [--children 16] [--repeat 7]

Start time: from `sandbox.start(payload)` until the worker says READY. A fork-server child comes from
a warm zygote that already holds the context; a fresh worker is a new zygote (a new Python, the context
sent and decoded, the namespaces built) plus its first fork -- what every child would cost without one.
Memory: PSS summed over the process tree under this process (/proc/PID/smaps_rollup; shared pages are
split between the processes sharing them, so the sum counts each page once), with every child alive
and having just scanned the whole context; the host process itself is reported apart.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

from rlmx.context.payload import ContextPayload
from rlmx.sandbox.base import SandboxSettings
from rlmx.sandbox.process import ProcessSandbox, ProcessSandboxes

SCAN = "n = context.count('needle')\nprint(len(context), n)"


def pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def tree(pid: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {c for c, p in parents.items() if p in frontier} - found
        found |= frontier
    return found


def sandbox_pss_mib() -> float:
    return sum(pss_kib(p) for p in tree(os.getpid())) / 1024


def host_pss_mib() -> float:
    return pss_kib(os.getpid()) / 1024


def make_context(mb: int) -> str:
    line = "the quick brown fox jumps over the lazy dog while the needle waits in the hay 0123456789\n"
    return (line * (mb * 1024 * 1024 // len(line) + 1))[: mb * 1024 * 1024]


async def no_rpc(method: str, params: dict[str, Any]) -> Any:
    raise RuntimeError("no sub-calls in this benchmark")


async def start_times(settings: SandboxSettings, payload: ContextPayload, repeat: int) -> dict[str, float]:
    """Median start time (ms) of a fork-server child and of a fresh worker."""
    boxes = ProcessSandboxes(settings)
    root = boxes()
    await root.start(payload)  # the zygote holds the context from now on
    forked = []
    for _ in range(repeat):
        box = boxes()
        t0 = time.perf_counter()
        await box.start(payload)
        forked.append(time.perf_counter() - t0)
        await box.close()
    await root.close()
    await boxes.aclose()
    fresh = []
    for _ in range(repeat):
        box = ProcessSandbox(settings)  # its own zygote: nothing is warm
        t0 = time.perf_counter()
        await box.start(payload)
        fresh.append(time.perf_counter() - t0)
        await box.close()
    return {"forked": statistics.median(forked) * 1000, "fresh": statistics.median(fresh) * 1000}


async def parallel_memory(settings: SandboxSettings, payload: ContextPayload, n: int, forked: bool) -> float:
    """PSS (MiB) of the sandbox processes with n children alive, each having scanned the context."""
    boxes = ProcessSandboxes(settings)
    root = boxes()
    await root.start(payload)
    children = [boxes() if forked else ProcessSandbox(settings) for _ in range(n)]
    await asyncio.gather(*(c.start(payload) for c in children))
    results = await asyncio.gather(*(c.execute(SCAN, no_rpc) for c in children))
    assert all(r.error is None for r in results), [r.error for r in results]
    total = sandbox_pss_mib()
    await asyncio.gather(*(c.close() for c in children))
    await root.close()
    await boxes.aclose()
    return total


async def one_child_memory(settings: SandboxSettings, payload: ContextPayload) -> dict[str, float]:
    boxes = ProcessSandboxes(settings)
    root = boxes()
    await root.start(payload)
    await root.execute(SCAN, no_rpc)
    base = sandbox_pss_mib()
    child = boxes()
    await child.start(payload)
    await child.execute(SCAN, no_rpc)
    forked = sandbox_pss_mib() - base
    await child.close()
    fresh_box = ProcessSandbox(settings)
    await fresh_box.start(payload)
    await fresh_box.execute(SCAN, no_rpc)
    fresh = sandbox_pss_mib() - base
    await fresh_box.close()
    await root.close()
    await boxes.aclose()
    return {"forked": forked, "fresh": fresh}


async def main(args: argparse.Namespace) -> None:
    text = make_context(args.mb)
    big = ContextPayload.of(text)
    small = ContextPayload.of(text[:1024])
    rows: list[tuple[str, str, str]] = []
    for backend in ("process", "process-unisolated"):
        settings = SandboxSettings(backend=backend)
        for label, payload in (("1 KiB", small), (f"{args.mb} MB", big)):
            times = await start_times(settings, payload, args.repeat)
            rows.append(
                (
                    f"child start, {label} context, {backend}",
                    f"{times['forked']:.1f} ms",
                    f"{times['fresh']:.1f} ms",
                )
            )
    settings = SandboxSettings()
    one = await one_child_memory(settings, big)
    rows.append(
        (
            f"PSS added by one child, {args.mb} MB context",
            f"{one['forked']:.1f} MiB",
            f"{one['fresh']:.1f} MiB",
        )
    )
    forked_peak = await parallel_memory(settings, big, args.children, forked=True)
    fresh_peak = await parallel_memory(settings, big, args.children, forked=False)
    rows.append(
        (
            f"PSS of root + {args.children} parallel children, {args.mb} MB context",
            f"{forked_peak:.0f} MiB",
            f"{fresh_peak:.0f} MiB",
        )
    )
    width = max(len(r[0]) for r in rows)
    print(f"{'':{width}}  {'fork-server':>12}  {'fresh worker':>12}")
    for name, a, b in rows:
        print(f"{name:{width}}  {a:>12}  {b:>12}")
    print(f"(host process PSS: {host_pss_mib():.0f} MiB; medians of {args.repeat}; {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=int, default=40, help="context size in MB")
    parser.add_argument("--children", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=7)
    asyncio.run(main(parser.parse_args()))
