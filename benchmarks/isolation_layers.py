"""The Landlock layer beside the namespace layer: per-turn overhead, cell start after a restart, peak
memory with a 40 MB context -- side by side in one run, the layers interleaved, medians of repeats.

    .venv/bin/python -m benchmarks.isolation_layers [--mb 40] [--repeat 7] [--cells 30]

- turn: one trivial cell's round trip (`x = 1`), median over `--cells` cells in a running REPL;
- restart: `restart()` (the worker killed, a new one forked from the warm zygote, READY) plus its
  first cell: what the model waits for after a timeout;
- first start: the run's first REPL (a zygote started, the context sent and loaded, the layer built);
- PSS: the sandbox's processes (zygote, monitors, workers) after the worker scanned the whole context,
  summed over /proc/PID/smaps_rollup (a page shared by several processes counts once).
Target: the Landlock layer within 1.2x of the namespace layer on each.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from benchmarks.sandbox_children import sandbox_pss_mib
from rlmx.context.payload import ContextPayload
from rlmx.sandbox.base import SandboxSettings
from rlmx.sandbox.process import ProcessSandbox

LAYERS = ("process-namespaces", "process-landlock")
SCAN = "n = context.count('needle')\nprint(len(context), n)"


async def _rpc(method: str, params: dict[str, Any]) -> Any:
    raise AssertionError("no sub-calls here")


async def one_round(backend: str, payload: ContextPayload, cells: int) -> dict[str, float]:
    sandbox = ProcessSandbox(SandboxSettings(backend=backend))
    t0 = time.perf_counter()
    await sandbox.start(payload)
    first = time.perf_counter() - t0
    try:
        await sandbox.execute(SCAN, _rpc)
        pss = sandbox_pss_mib()
        turns = []
        for _ in range(cells):
            t = time.perf_counter()
            result = await sandbox.execute("x = 1", _rpc)
            turns.append(time.perf_counter() - t)
            assert result.error is None, result.error
        t = time.perf_counter()
        await sandbox.restart()
        result = await sandbox.execute("x = 1", _rpc)
        restart = time.perf_counter() - t
        assert result.error is None, result.error
        layer = sandbox.isolation()["layer"]
    finally:
        await sandbox.close()
    assert layer == backend.removeprefix("process-"), (backend, layer)
    return {
        "turn_ms": statistics.median(turns) * 1000,
        "restart_ms": restart * 1000,
        "first_start_ms": first * 1000,
        "pss_mib": pss,
    }


async def main_async(mb: int, repeat: int, cells: int) -> None:
    text = ("lorem ipsum needle dolor " * (mb * 1024 * 1024 // 25 + 1))[: mb * 1024 * 1024]
    payload = ContextPayload("inline-text", text=text)
    rounds: dict[str, list[dict[str, float]]] = {layer: [] for layer in LAYERS}
    for _ in range(repeat):
        for backend in LAYERS:  # interleaved: a load change hits both layers alike
            rounds[backend].append(await one_round(backend, payload, cells))
    keys = ("turn_ms", "restart_ms", "first_start_ms", "pss_mib")
    medians = {b: {k: statistics.median(r[k] for r in rounds[b]) for k in keys} for b in LAYERS}
    print(f"context {mb} MB, {repeat} repeats (medians), {cells} cells per turn figure")
    print(f"{'':16} {'namespaces':>12} {'landlock':>12} {'ratio':>7}")
    for key in keys:
        ns, ll = medians["process-namespaces"][key], medians["process-landlock"][key]
        print(f"{key:16} {ns:12.2f} {ll:12.2f} {ll / ns:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--cells", type=int, default=30)
    args = parser.parse_args()
    asyncio.run(main_async(args.mb, args.repeat, args.cells))


if __name__ == "__main__":
    main()
