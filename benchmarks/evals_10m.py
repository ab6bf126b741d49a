"""The eval suite at 1M-10M tokens (a benchmark, not a test): how long generating an item takes, and
the oracle run of every family (scripted root + oracle reader, no model) at those sizes.

    .venv/bin/python benchmarks/evals_10m.py --sizes 1m,10m --n 1
    .venv/bin/python benchmarks/evals_10m.py --sizes 10m --suite oolong --methods rlm,bm25

Prints one line per (family, size, method): generation seconds, context tokens, score, model calls and
run seconds. Needs about 3 GB of memory at 10M tokens (the context, its JSON copy for the REPL worker and
the worker's own copy).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from rlmx.evals import EvalConfig, Runner, generate_item, parse_size, size_label
from rlmx.limits import Limits


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1m,10m")
    parser.add_argument("--suite", default="niah,oolong,oolong_pairs,doc_multihop,codeqa")
    parser.add_argument("--methods", default="rlm,direct,bm25,summary")
    parser.add_argument("--n", type=int, default=1)
    parser.add_argument("--window", type=int, default=131_072, help="the baselines' window (tokens)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    suite = tuple(args.suite.split(","))
    sizes = tuple(parse_size(s) for s in args.sizes.split(","))

    print("generation (seconds, context tokens):")
    for name in suite:
        for size in sizes:
            started = time.perf_counter()
            item = generate_item(name, size, 0)
            print(
                f"  {name:13s} {size_label(size):>4s}  {time.perf_counter() - started:6.2f} s  {item.context_tokens:>11,} tok"
            )
            del item

    out = args.out or Path(tempfile.mkdtemp(prefix="rlmx-evals-10m-"))
    config = EvalConfig(
        suite=suite,
        sizes=sizes,
        out=out,
        n=args.n,
        methods=tuple(args.methods.split(",")),
        oracle=True,
        window=args.window,
        concurrency=1,
        trace=False,
        limits=Limits(max_llm_calls=20_000, max_iterations=10, timeout_s=3_600),
    )
    started = time.perf_counter()
    records = asyncio.run(Runner(config).run())
    print(f"\noracle run ({time.perf_counter() - started:.1f} s in all; results in {out}):")
    for r in sorted(records, key=lambda r: (r["family"], r["size_tokens"], r["method"])):
        print(
            f"  {r['family']:13s} {r['size']:>4s} {r['method']:8s} score {r['score']:.3f}  "
            f"{r['usage']['calls']:>6} calls  {r['elapsed_s']:8.1f} s  {r['stopped_by']}"
            + ("  (truncated)" if r["truncated"] else "")
        )


if __name__ == "__main__":
    main()
