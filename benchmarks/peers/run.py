"""rlmx beside the official RLM (`rlms` 0.1.3) and DSPy 3.4.1 `dspy.RLM`: the same scenarios, one
scripted server (in its own process), replies in each framework's conventions, one table.

    .venv/bin/python benchmarks/peers/setup.py          # once: the peers' virtual environments
    .venv/bin/python benchmarks/peers/run.py            # medians of 3; a few minutes
    .venv/bin/python benchmarks/peers/run.py --repeats 1 --only trivial,fanout

Columns: `official` runs with its defaults (local REPL; llm_query_batched at its fixed 16 in flight; its
RLMLogger writes the trace). `dspy` is DSPy's default sandbox (Deno + Pyodide), which imports a module
from deno.land at start-up and cannot start offline; `dspy-local` is DSPy's `LocalInterpreter` (a plain
subprocess, which DSPy documents as not a security sandbox), run so that DSPy's loop can still be
measured. Each run is a fresh process; "ours / peer" < 1 means ours is smaller or faster.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import RLMX, SCENARIOS, Contexts, Framework, measure, table  # noqa: E402
from benchmarks.measure import compile_like_an_install, load_note  # noqa: E402
from benchmarks.peers.setup import python_of, ready  # noqa: E402

PEERS_DIR = Path(__file__).resolve().parent


def peers() -> list[Framework]:
    official = Framework(
        "official",
        "official",
        [str(python_of("official")), str(PEERS_DIR / "official_driver.py")],
        16,  # LMHandler(batch_max_concurrent=16), not reachable from RLM(...)
        trace="dir",
    )
    dspy_cmd = [str(python_of("dspy")), str(PEERS_DIR / "dspy_driver.py")]
    dspy = Framework("dspy", "dspy", dspy_cmd, 8, {"interpreter": "default"}, trace=None)
    dspy_local = Framework("dspy-local", "dspy", dspy_cmd, 8, {"interpreter": "local"}, trace=None)
    for fw in (official, dspy, dspy_local):
        if not ready("official" if fw.key == "official" else "dspy"):
            fw.unavailable = "not installed: run benchmarks/peers/setup.py"
    return [official, dspy, dspy_local]


def probe(fw: Framework, ctx: Contexts) -> None:
    """A framework that cannot start here is marked once, with its own words, and not run again."""
    if fw.unavailable:
        return
    result = SCENARIOS["trivial"](fw, ctx)
    error = result.get("error")
    if error and ("deno" in str(error).lower() or "health check" in str(error)):
        fw.unavailable = (
            "cannot start offline: its Deno sandbox imports deno.land/std at start-up "
            f"({str(error).splitlines()[0][:60]})"
        )
    elif error:
        fw.unavailable = f"cannot start: {str(error)[:120]}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenario names")
    parser.add_argument("--peers", default="official,dspy,dspy-local")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    chosen = [fw for fw in peers() if fw.key in args.peers.split(",")]
    ctx = Contexts()
    compile_like_an_install()
    print(f"# rlmx vs peers ({load_note()})", flush=True)
    columns = []
    for fw in [RLMX, *chosen]:
        probe(fw, ctx)
        columns.append((fw, measure(fw, ctx, names, args.repeats, lambda s: print(s, flush=True))))
    print(f"\nMedians of {args.repeats}; {load_note()} at the end.\n")
    print(table(columns, ratios=True))
    for fw in chosen:
        if fw.unavailable:
            print(f"\n{fw.key}: {fw.unavailable}")
    if args.json:
        Path(args.json).write_text(json.dumps({fw.key: f for fw, f in columns}, indent=1, default=str))


if __name__ == "__main__":
    main()
