"""Batches: items/min by worker count, `rlmx batch` with the local and the ray executor. Prints a table;
asserts nothing.

    .venv/bin/python benchmarks/batch_scale.py            # W = 1, 2, 4; latency 1 s; 1-2 minutes
    .venv/bin/python benchmarks/batch_scale.py --quick    # latency 0.2 s, 2 items a worker

The model is the scripted server (in this process) with a fixed latency a call, and every item takes the
same calls: `--turns` root turns (code that counts the words of the item's inline context, then
`FINAL_VAR(n)`), so the ideal is known: W workers finish W * 60 / (turns * latency) items a minute.

For each W: a batch of `--items-per-worker` * W items with the local executor (`concurrency=W`), then a
local Ray instance of its own (`ray.init(address="local", num_cpus=W)` in a temp dir of its own) and
the same batch with `executor="ray", concurrency=W, cpus_per_item=1`, then `ray.shutdown()`. A batch's
wall time runs from before `rlmx.batch.run` to its last result; `ray.init` is timed apart. Before the
first batch, a one-item local batch warms this process up (rlmx's imports), as any driver that imported
rlmx is; Ray's worker processes start cold in each instance, which is part of what Ray costs.

Columns beside the throughput: `ray - local, per item` is (ray wall - local wall) / items at the same W
(a fixed start-up cost spread over the batch, so it shrinks as batches grow); `first result` and
`before the first item ran` (the first result's time minus its own `elapsed_s`: for ray, the fleet actor,
the worker processes' start and their imports) say where the start-up goes; `median item` and `slowest
item` are of the items' own `elapsed_s` (in their worker: the RLM built on first use, the sandbox, the
calls), to compare with turns * latency: the slowest is a cold worker's first item.

After each `ray.shutdown()`, the processes of that instance (its GCS, raylet and agents, whose command
lines name its temp dir, and every process below them: workers and actors) must be gone; any left are
reported, never killed. Other Ray clusters on the machine are not touched: the instance here never
connects to them (address="local", its own temp dir) and nothing runs `ray stop`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Before Ray is imported: no token auth for a local instance (Ray 2.60 turns it on otherwise), no usage
# stats, no metrics exporter (the minimal install has no agent for it, and would log its retries).
os.environ["RAY_AUTH_MODE"] = "disabled"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["RAY_USAGE_STATS_PROMPT_ENABLED"] = "0"
os.environ["RAY_enable_metrics_collection"] = "0"
os.environ.pop("RAY_ADDRESS", None)
os.environ["OPENAI_API_KEY"] = "sk-bench-fake"  # the scripted server's; Ray's workers inherit it

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import rlmx.batch  # noqa: E402
from benchmarks.measure import descendants, load_note  # noqa: E402
from rlmx import RLM, ModelOptions  # noqa: E402
from rlmx.testing import ScriptedModel, ScriptedServer, forbid_real_providers  # noqa: E402

MODEL = "openai:scripted"
QUESTION = "How many words are in the context?"
COUNT = "```repl\nwords = str(context).split()\nn = len(words)\nprint(n, words[:3])\n```"


def source_note() -> str:
    """The rlmx measured: the commit, and whether src/rlmx/batch differs from it (others edit it)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "src/rlmx/batch"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "rlmx (no git)"
    return f"rlmx at {head or '?'}" + (" + uncommitted changes in src/rlmx/batch" if dirty else "")


def script(turns: int) -> ScriptedModel:
    """`turns` root turns an item: code that counts the words (again on each code turn), then the count."""
    return ScriptedModel(root=[COUNT] * (turns - 1) + ["FINAL_VAR(n)"], final="FINAL(forced)")


def make_items(n: int, tag: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """`n` items, item i asking for the words of an inline context of i + 1 words; and the answers."""
    items, gold = [], {}
    for i in range(n):
        item_id = f"{tag}-{i:03d}"
        items.append({"id": item_id, "question": QUESTION, "context": {"text": " ".join(["word"] * (i + 1))}})
        gold[item_id] = i + 1
    return items, gold


@dataclass
class Row:
    workers: int
    executor: str
    items: int
    wall_s: float  # before rlmx.batch.run -> the last result
    first_s: float  # before rlmx.batch.run -> the first result
    right: int  # answers equal to the word count
    calls: int  # requests the server answered during the batch
    item_s: float  # median of the items' own elapsed_s (in their worker: the RLM, the sandbox, the calls)
    slowest_s: float  # the longest of them (a cold worker's first item)
    before_s: float  # first_s - the first result's elapsed_s: everything before that item started running
    init_s: float | None = None  # ray.init
    shutdown_s: float | None = None  # ray.shutdown
    left: list[str] = field(default_factory=list)  # processes of the instance alive after shutdown
    stopped: int = 0  # processes of the instance just before shutdown

    @property
    def items_per_min(self) -> float:
        return 60.0 * self.items / self.wall_s


def run_batch(srv: ScriptedServer, workers: int, executor: str, n: int, tag: str) -> Row:
    items, gold = make_items(n, tag)
    served = srv.served
    started = time.monotonic()
    rlm = RLM(MODEL, model_options=ModelOptions(base_url=srv.url))
    batch = rlmx.batch.run(
        items, rlm, executor=executor, concurrency=workers, cpus_per_item=1, say=lambda _line: None
    )
    first = last = started
    right = 0
    elapsed: list[float] = []
    for result in batch:
        last = time.monotonic()
        if first == started:
            first = last
        right += result["answer"] == gold[str(result["id"])] and result["stopped_by"] == "final"
        elapsed.append(result["elapsed_s"])
    first_s = first - started
    return Row(
        workers,
        executor,
        n,
        wall_s=last - started,
        first_s=first_s,
        right=right,
        calls=srv.served - served,
        item_s=statistics.median(elapsed),
        slowest_s=max(elapsed),
        before_s=first_s - elapsed[0],
    )


def processes_naming(text: str) -> list[int]:
    """Every process whose command line contains `text` (from /proc)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in cmdline:
            found.append(int(pid))
    return found


def identity(pid: int) -> str | None:
    """`pid name` with its start time (so a reused pid is not taken for it), or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
    return f"{pid} {name} @{rest[19]}"


def instance_processes(temp_dir: str) -> set[str]:
    """The processes of the Ray instance in `temp_dir`: its GCS, raylet and agents (their command lines
    name it) and everything below them (workers and actors, whose titles read `ray::...`)."""
    found = set()
    for top in processes_naming(temp_dir):
        for pid in descendants(top):
            if (who := identity(pid)) is not None:
                found.add(who)
    return found


def run_on_ray(srv: ScriptedServer, workers: int, n: int, tag: str) -> Row:
    """The batch on a local Ray instance of its own (started, measured, stopped, checked gone)."""
    import ray

    temp_dir = tempfile.mkdtemp(prefix="rlmxb-")  # short: Ray's socket paths live under it
    started = time.monotonic()
    ray.init(
        address="local",  # a new instance, never another cluster found on this machine
        num_cpus=workers,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="WARNING",
        _temp_dir=temp_dir,
    )
    init_s = time.monotonic() - started
    try:
        row = run_batch(srv, workers, "ray", n, tag)
    finally:
        started_ones = instance_processes(temp_dir)
        started = time.monotonic()
        ray.shutdown()
        shutdown_s = time.monotonic() - started

    def alive() -> list[str]:
        still = {who for who in started_ones if identity(int(who.split()[0])) == who}
        return sorted(still | instance_processes(temp_dir))

    deadline = time.monotonic() + 15
    while (left := alive()) and time.monotonic() < deadline:
        time.sleep(0.2)
    if not left:
        shutil.rmtree(temp_dir, ignore_errors=True)
    row.init_s, row.shutdown_s, row.left, row.stopped = init_s, shutdown_s, left, len(started_ones)
    return row


def table(rows: list[Row], turns: int, latency: float) -> str:
    local = {r.workers: r for r in rows if r.executor == "local"}
    out = [
        "| workers | executor | items | ray.init (s) | wall (s) | items/min | ideal items/min "
        "| ratio to ideal | ray - local, per item (ms) | first result (s) | before the first item ran (s) "
        "| median item (s) | slowest item (s) | right answers | calls |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ideal = r.workers * 60.0 / (turns * latency)
        init = f"{r.init_s:.2f}" if r.init_s is not None else "-"
        over = "-"
        if r.executor == "ray" and r.workers in local:
            over = f"{(r.wall_s - local[r.workers].wall_s) * 1000 / r.items:+.0f}"
        out.append(
            f"| {r.workers} | {r.executor} | {r.items} | {init} | {r.wall_s:.2f} | {r.items_per_min:.1f} "
            f"| {ideal:.1f} | {r.items_per_min / ideal:.2f} | {over} | {r.first_s:.2f} | {r.before_s:.2f} "
            f"| {r.item_s:.2f} | {r.slowest_s:.2f} | {r.right}/{r.items} | {r.calls}/{r.items * turns} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="latency 0.2 s, 2 items a worker")
    parser.add_argument("--latency", type=float, help="seconds a model call (default 1.0)")
    parser.add_argument("--items-per-worker", type=int, help="items a batch, per worker (default 4)")
    parser.add_argument("--turns", type=int, default=2, help="model calls an item (root turns, >= 2)")
    parser.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    parser.add_argument("--executors", default="local,ray")
    args = parser.parse_args(argv)
    latency = args.latency if args.latency is not None else (0.2 if args.quick else 1.0)
    per_worker = args.items_per_worker or (2 if args.quick else 4)
    if args.turns < 2:
        parser.error("--turns must be at least 2 (code, then the answer)")
    executors = [e for e in args.executors.split(",") if e]
    forbid_real_providers()
    print(
        f"# batch scale: {args.turns} calls an item at {latency:g} s, {per_worker} items a worker "
        f"({source_note()}; {load_note()})",
        flush=True,
    )
    model = script(args.turns)
    with ScriptedServer(model, latency=0.0) as warm:
        run_batch(warm, 1, "local", 1, "warm-up")
    rows: list[Row] = []
    with ScriptedServer(model, latency=latency) as srv:
        for workers in (int(w) for w in args.workers.split(",")):
            n = per_worker * workers
            for executor in executors:
                tag = f"w{workers}-{executor}"
                row = (
                    run_on_ray(srv, workers, n, tag)
                    if executor == "ray"
                    else run_batch(srv, workers, executor, n, tag)
                )
                rows.append(row)
                extra = ""
                if row.init_s is not None:
                    extra = f"; ray.init {row.init_s:.2f} s, ray.shutdown {row.shutdown_s:.2f} s"
                    left = ", ".join(row.left) or "none"
                    extra += f"; of its {row.stopped} processes, left after shutdown: {left}"
                print(
                    f"  W={workers} {executor}: {n} items in {row.wall_s:.2f} s "
                    f"({row.items_per_min:.1f}/min), first after {row.first_s:.2f} s{extra}",
                    flush=True,
                )
    ideal_s = per_worker * args.turns * latency
    print(
        f"\n{args.turns} calls an item at {latency:g} s: an item ideally takes {args.turns * latency:g} s, a "
        f"batch {ideal_s:g} s whatever W. {load_note()} at the end.\n"
    )
    print(table(rows, args.turns, latency))
    mine = [p for r in rows for p in r.left]
    print(
        f"\nProcesses of these Ray instances still alive: {', '.join(mine) if mine else 'none'} (checked: "
        f"each instance's GCS, raylet and agents, which name its temp dir, and every process below them)"
    )


if __name__ == "__main__":
    main()
