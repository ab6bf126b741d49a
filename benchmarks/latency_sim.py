"""Latency simulation: a tickets-like task with ~1,000 items under API-like latencies.

    .venv/bin/python benchmarks/latency_sim.py                 # ours; medians of 3
    .venv/bin/python benchmarks/latency_sim.py --peers official --repeats 1

The server draws each request's latency from a log-normal distribution (root median 2 s, sub-call median
0.7 s, sigma 0.7: p99 about 5x the median), deterministic per request content, and every latency is scaled
by `--scale` (default 0.1, so a run takes seconds, not a minute; the ratios are what matter). The task is
the support-tickets task on 50,000 tickets: 3 root turns of code and a finish, one llm_query_batched of
~1,000 sub-calls. The wall time is compared with two schedules of the very latencies the server drew:
- sequential: every request one after the other (a loop of llm_query);
- ideal at C: root turns in sequence, each batch on C slots (each item takes the next free slot), no
  client-side time at all; C = the framework's concurrency, and C = infinity (every item at once).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import RLMX, Contexts, Framework, _tickets_question  # noqa: E402
from benchmarks.measure import (  # noqa: E402
    compile_like_an_install,
    list_schedule_s,
    load_note,
    median,
    run_driver,
)
from benchmarks.serve import Served, ServerProcess  # noqa: E402

TICKETS = 50_000  # ~1,000 tickets of the three users


def schedules(requests: list[Served], concurrency: int) -> dict[str, float]:
    ordered = sorted(requests, key=lambda r: r.t_received)
    sequential = sum(r.latency for r in ordered)
    ideal_c = ideal_inf = 0.0
    batch: list[float] = []
    for r in [*ordered, None]:
        if r is None or r.root:
            if batch:
                ideal_c += list_schedule_s(batch, concurrency)
                ideal_inf += max(batch)
                batch = []
            if r is not None:
                ideal_c += r.latency
                ideal_inf += r.latency
        else:
            batch.append(r.latency)
    return {"sequential_s": sequential, "ideal_at_c_s": ideal_c, "ideal_unbounded_s": ideal_inf}


def one_run(fw: Framework, ctx: Contexts, latency: dict[str, Any]) -> dict[str, Any]:
    path, gold = ctx.tickets(TICKETS)
    spec = {**fw.spec, "context_file": str(path), "question": _tickets_question(), "max_llm_calls": 5_000}
    with ServerProcess(fw.policy, "tickets_re", latency=latency) as srv:
        run = run_driver(fw.command, {**spec, "url": srv.url})
        requests = srv.requests()
    out: dict[str, Any] = {"wall_s": run.result.get("call_s"), **schedules(requests, fw.concurrency)}
    out["sub_calls"] = sum(1 for r in requests if not r.root)
    out["vs_ideal_at_c"] = out["wall_s"] / out["ideal_at_c_s"] if out["wall_s"] else None
    out["right"] = str(run.result.get("answer")).strip() == str(gold)
    if run.result.get("error"):
        out["error"] = run.result["error"]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", type=float, default=0.1, help="multiply every latency by this")
    parser.add_argument("--sigma", type=float, default=0.7)
    parser.add_argument("--peers", default="", help="e.g. official,dspy-local (after peers/setup.py)")
    args = parser.parse_args(argv)
    latency = {"root_median": 2.0, "sub_median": 0.7, "sigma": args.sigma, "scale": args.scale, "seed": 1}
    frameworks = [RLMX]
    if args.peers:
        from benchmarks.peers.run import peers

        frameworks += [fw for fw in peers() if fw.key in args.peers.split(",") and not fw.unavailable]
    ctx = Contexts()
    compile_like_an_install()
    print(f"# latency simulation, latencies x{args.scale} ({load_note()})", flush=True)
    rows = []
    for fw in frameworks:
        runs = []
        for i in range(args.repeats):
            result = one_run(fw, ctx, latency)
            print(
                f"  {fw.key} #{i + 1}: "
                + ", ".join(
                    f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()
                ),
                flush=True,
            )
            runs.append(result)
        rows.append(
            (
                fw,
                {
                    k: median([r[k] for r in runs])
                    for k in ("wall_s", "sequential_s", "ideal_at_c_s", "ideal_unbounded_s", "vs_ideal_at_c")
                },
                all(r["right"] for r in runs),
                runs[0]["sub_calls"],
            )
        )
    print(f"\nMedians of {args.repeats}; {load_note()} at the end.\n")
    print(
        "| framework | in flight | sub-calls | wall (s) | sequential (s) | ideal at its concurrency (s) "
        "| ideal, unbounded (s) | wall / ideal at its concurrency | right answer |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for fw, m, right, subs in rows:
        print(
            f"| {fw.key} | {fw.concurrency} | {subs} | {m['wall_s']:.2f} | {m['sequential_s']:.1f} | "
            f"{m['ideal_at_c_s']:.2f} | {m['ideal_unbounded_s']:.2f} | {m['vs_ideal_at_c']:.2f} | {right} |"
        )


if __name__ == "__main__":
    main()
