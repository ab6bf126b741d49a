"""Harness benchmarks: rlmx alone, against the scripted server in its own process.

    .venv/bin/python benchmarks/harness.py            # all scenarios, medians of 3
    .venv/bin/python benchmarks/harness.py --repeats 1 --only trivial,fanout

Each run is a fresh driver process (benchmarks/drivers/rlmx_driver.py), so "time inside the call" includes
first-call costs, and the peak PSS covers exactly that process tree (the REPL worker included).
`benchmarks/peers/run.py` runs the same scenarios for the official RLM and DSPy beside ours.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.measure import (  # noqa: E402
    batch_start_ms,
    batches,
    compile_like_an_install,
    floor_s,
    load_note,
    median,
    root_gaps_ms,
    run_driver,
    shape,
    sub_span_s,
)
from benchmarks.serve import ServerProcess  # noqa: E402
from rlmx.trace.events import LMCall, from_record  # noqa: E402

CONTEXT_MB = 40
TURNS = 20
FANOUT = 1_000
LATENCY_S = 0.1
OUR_CONCURRENCY = 64


@dataclass
class Framework:
    """One RLM implementation: how to run its driver and what it fixes (concurrency, trace)."""

    key: str  # column name
    policy: str  # conventions of its replies: rlmx | official | dspy
    command: list[str]
    concurrency: int  # sub-calls in flight for llm_query_batched
    spec: dict[str, Any] = field(default_factory=dict)
    trace: str | None = "file"  # "file": driver gets `trace`; "dir": `trace_dir`; None: no trace
    note: str = ""
    unavailable: str | None = None  # why it cannot run here


RLMX = Framework(
    "rlmx",
    "rlmx",
    [sys.executable, str(ROOT / "benchmarks/drivers/rlmx_driver.py")],
    OUR_CONCURRENCY,
    {"concurrency": OUR_CONCURRENCY},
)


def sdk_floor_command() -> list[str]:
    return [sys.executable, str(ROOT / "benchmarks/drivers/sdk_floor.py")]


# --- contexts ---------------------------------------------------------------------------------------


class Contexts:
    """Context files written once per benchmark run."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="rlmx-bench-"))
        self._files: dict[str, Path] = {}
        self._runs = 0

    def big(self, mb: int = CONTEXT_MB) -> Path:
        key = f"big{mb}"
        if key not in self._files:
            line = "2024-05-01 | 00042 | the quick brown fox jumps over the lazy dog, again and again\n"
            path = self.dir / f"{key}.txt"
            path.write_text(line * (mb * 1_000_000 // len(line)))
            self._files[key] = path
        return self._files[key]

    def tickets(self, n: int = 5_000) -> tuple[Path, int]:
        from examples.support_tickets.generate import generate

        key = f"tickets{n}"
        text, gold, _ = generate(seed=0, n=n)
        if key not in self._files:
            path = self.dir / f"{key}.txt"
            path.write_text(text)
            self._files[key] = path
        return self._files[key], gold

    def trace_target(self, fw: Framework, name: str) -> dict[str, Any]:
        """A fresh trace file (or directory) for one run."""
        self._runs += 1
        if fw.trace == "file":
            return {"trace": str(self.dir / f"{fw.key}-{name}-{self._runs}.jsonl")}
        if fw.trace == "dir":
            path = self.dir / f"{fw.key}-{name}-{self._runs}"
            path.mkdir()
            return {"trace_dir": str(path)}
        return {}


# --- scenarios (one run each; the caller takes medians) ---------------------------------------------


def scenario_trivial(fw: Framework, ctx: Contexts) -> dict[str, Any]:
    with ServerProcess(fw.policy, "trivial") as srv:
        run = run_driver(fw.command, {**fw.spec, "url": srv.url, "question": "Say ok."})
    return {
        "trivial_s": run.result.get("call_s"),
        "trivial_process_s": run.process_s,
        "error": run.result.get("error"),
        "_run": run,
    }


def scenario_context(fw: Framework, ctx: Contexts) -> dict[str, Any]:
    """40 MB context, 20 trivial turns + finish: per-turn overhead, peak PSS of the tree, trace size."""
    path = ctx.big()
    spec = {**fw.spec, "context_file": str(path), "question": "How long is the context?"}
    if fw.trace == "file":  # ours: the trace is on by default, so it is on while we measure
        spec.update(ctx.trace_target(fw, "context"))
    with ServerProcess(fw.policy, "turns", turns=TURNS) as srv:
        run = run_driver(fw.command, {**spec, "url": srv.url}, sample_memory=True)
        requests = srv.requests()
        trace_bytes = run.result.get("trace_bytes")
        if fw.trace == "dir":  # a peer whose trace is opt-in: measured with its defaults, traced apart
            srv.reset()
            traced = run_driver(fw.command, {**spec, **ctx.trace_target(fw, "context"), "url": srv.url})
            trace_bytes = traced.result.get("trace_bytes")
    gaps = root_gaps_ms(requests)
    roots = sum(1 for r in requests if r.root)
    out: dict[str, Any] = {
        "turn_overhead_ms": median(gaps) if gaps else None,
        "peak_pss_mb": run.peak_pss_mb,
        "context_mb": path.stat().st_size / 1e6,
        "trace_kb_per_turn": trace_bytes / 1000 / roots if trace_bytes and roots else None,
        "context_run_s": run.result.get("call_s"),
        "error": run.result.get("error") or (None if roots >= TURNS + 1 else f"only {roots} root turns"),
        "_run": run,
    }
    trace = spec.get("trace")
    if trace and Path(trace).exists():
        out["trace_kb_per_turn_beyond_excerpts"] = trace_beyond_excerpts(Path(trace)) / 1000 / roots
    return out


def trace_beyond_excerpts(path: Path) -> int:
    """Bytes of an rlmx trace minus the capped message/reply excerpts of its model-call records."""
    total = 0
    for line in path.read_text().splitlines():
        event = from_record(json.loads(line))
        size = len(line.encode()) + 1
        if isinstance(event, LMCall):
            for excerpts in (event.messages, event.reply):
                if excerpts is not None:
                    size -= len(json.dumps(excerpts, ensure_ascii=False).encode())
        total += size
    return total


def scenario_fanout(fw: Framework, ctx: Contexts) -> dict[str, Any]:
    """1,000 llm_query_batched sub-calls at 100 ms; the SDK floor at the same concurrency, same server."""
    spec = {**fw.spec, "question": "Classify the items.", "max_llm_calls": 5_000}
    with ServerProcess(fw.policy, "fanout", latency=LATENCY_S, batch=FANOUT) as srv:
        run = run_driver(fw.command, {**spec, "url": srv.url})
        requests = srv.requests()
        floor_span, floor_call = None, None
        if fw.key == RLMX.key:  # the SDK floor at our concurrency (peers fix their own; no floor needed)
            srv.reset()
            floor_run = run_driver(
                sdk_floor_command(), {"url": srv.url, "n": FANOUT, "concurrency": fw.concurrency}
            )
            if floor_run.result.get("call_s") is None:
                raise RuntimeError(f"the SDK floor driver failed: {floor_run.stderr_tail[-500:]}")
            floor_span = sub_span_s(srv.requests()[1:])  # without the warm-up request
            floor_call = floor_run.result.get("call_s")
    span = sub_span_s(requests)
    subs = sum(1 for r in requests if not r.root)
    return {
        "fanout_batch_start_ms": batch_start_ms(requests),
        "fanout_span_s": span,
        "fanout_call_s": run.result.get("call_s"),
        "fanout_process_s": run.process_s,
        "sdk_floor_span_s": floor_span,
        "sdk_floor_call_s": floor_call,
        "fanout_vs_sdk_floor": span / floor_span if floor_span else None,
        "fanout_ideal_s": -(-FANOUT // fw.concurrency) * LATENCY_S,
        "error": run.result.get("error") or (None if subs == FANOUT else f"{subs} sub-calls, not {FANOUT}"),
        "_run": run,
    }


def scenario_tickets(fw: Framework, ctx: Contexts, latency: float) -> dict[str, Any]:
    path, gold = ctx.tickets()
    spec = {**fw.spec, "context_file": str(path), "question": _tickets_question()}
    with ServerProcess(fw.policy, "tickets", latency=latency) as srv:
        run = run_driver(fw.command, {**spec, "url": srv.url})
        requests = srv.requests()
    tag = f"tickets_{int(latency * 1000)}ms"
    floor = floor_s(requests, fw.concurrency, latency)
    sdk_s = None
    if fw.key == RLMX.key and latency:  # the same shape of requests from a bare SDK client
        with ServerProcess(fw.policy, "tickets", latency=latency) as srv:
            spec_sdk = {"url": srv.url, "schedule": shape(requests), "concurrency": fw.concurrency}
            sdk_run = run_driver(sdk_floor_command(), spec_sdk)
            sdk_s = sdk_run.result.get("call_s")
            if sdk_s is None:
                raise RuntimeError(f"the SDK schedule driver failed: {sdk_run.stderr_tail[-500:]}")
    call_s = run.result.get("call_s")
    answer = run.result.get("answer")
    right = str(answer).strip() == str(gold)
    return {
        f"{tag}_s": call_s,
        f"{tag}_floor_s": floor if latency else None,
        f"{tag}_vs_floor": call_s / floor if latency and call_s and floor else None,
        f"{tag}_sdk_s": sdk_s,
        f"{tag}_vs_sdk": call_s / sdk_s if sdk_s and call_s else None,
        f"{tag}_batches": batches(requests),
        "error": run.result.get("error") or (None if right else f"answer {answer!r}, expected {gold}"),
        "_run": run,
    }


def _tickets_question() -> str:
    from examples.support_tickets.generate import QUESTION

    return QUESTION


SCENARIOS: dict[str, Callable[[Framework, Contexts], dict[str, Any]]] = {
    "trivial": scenario_trivial,
    "context": scenario_context,
    "fanout": scenario_fanout,
    "tickets0": lambda fw, ctx: scenario_tickets(fw, ctx, 0.0),
    "tickets100": lambda fw, ctx: scenario_tickets(fw, ctx, LATENCY_S),
}


def measure(
    fw: Framework, ctx: Contexts, names: list[str], repeats: int, log: Callable[[str], None]
) -> dict[str, Any]:
    """Median of `repeats` runs of every metric of every scenario in `names`; errors kept per scenario."""
    figures: dict[str, Any] = {}
    for name in names:
        if fw.unavailable:
            figures[f"{name}:error"] = fw.unavailable
            continue
        runs = []
        for i in range(repeats):
            result = SCENARIOS[name](fw, ctx)
            run = result.pop("_run")
            shown = {k: v for k, v in result.items() if v is not None and not isinstance(v, list)}
            log(f"  {fw.key} {name} #{i + 1}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in shown.items()))
            if result.get("error"):
                log(f"    stderr: {run.stderr_tail[-400:]!r}")
            runs.append(result)
            if result.get("error") and i == 0:
                break  # a framework that fails a scenario fails it every time
        errors = [r["error"] for r in runs if r.get("error")]
        if errors:
            figures[f"{name}:error"] = errors[0]
        for key in runs[0]:
            if key == "error":
                continue
            values = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
            figures[key] = median(values) if values else runs[0][key]
    return figures


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


# --- the table ----------------------------------------------------------------------------------------

# (metric key, label, unit, lower is better, our target as text)
ROWS: list[tuple[str, str, str, str]] = [
    ("trivial_s", "trivial 1-turn run, inside the call", "s", "<= 0.2 s"),
    ("trivial_process_s", "  whole process (interpreter start and imports too)", "s", ""),
    ("turn_overhead_ms", "per-turn overhead, 40 MB context (median gap at the server)", "ms", "<= 3 ms"),
    ("peak_pss_mb", "peak PSS of the process tree, 40 MB context", "MB", "<= 1.5 x ctx + 150 MB"),
    ("trace_kb_per_turn", "trace size per turn, run above", "KB", ""),
    ("trace_kb_per_turn_beyond_excerpts", "  ... beyond the capped message excerpts", "KB", "<= 10 KB"),
    ("fanout_batch_start_ms", "1,000 x 100 ms sub-calls: root reply -> first sub-call received", "ms", ""),
    ("fanout_span_s", "  first sub-call received -> last answered", "s", ""),
    ("sdk_floor_span_s", "  SDK floor: bare AsyncOpenAI, same concurrency", "s", ""),
    ("fanout_vs_sdk_floor", "  ratio to the SDK floor", "x", "<= 1.10"),
    ("fanout_call_s", "  whole run, inside the call (2 root turns at 100 ms too)", "s", ""),
    ("fanout_process_s", "  whole process (start-up included)", "s", ">= 3x faster than official"),
    ("tickets_0ms_s", "tickets task, 0 ms latency", "s", ""),
    ("tickets_100ms_s", "tickets task, 100 ms latency", "s", ""),
    ("tickets_100ms_floor_s", "  its floor at the framework's concurrency", "s", ""),
    ("tickets_100ms_vs_floor", "  ratio to that floor", "x", "<= 1.15"),
    ("tickets_100ms_sdk_s", "  the same requests from a bare AsyncOpenAI (same concurrency)", "s", ""),
    ("tickets_100ms_vs_sdk", "  ratio to that", "x", ""),
]
SCENARIO_OF = {
    "trivial_s": "trivial",
    "trivial_process_s": "trivial",
    "turn_overhead_ms": "context",
    "peak_pss_mb": "context",
    "trace_kb_per_turn": "context",
    "trace_kb_per_turn_beyond_excerpts": "context",
    "tickets_0ms_s": "tickets0",
}


def scenario_of(key: str) -> str:
    if key in SCENARIO_OF:
        return SCENARIO_OF[key]
    return "tickets100" if key.startswith("tickets_100") else "fanout"


def table(columns: list[tuple[Framework, dict[str, Any]]], *, ratios: bool) -> str:
    """One markdown table: a column per framework, our ratio to each peer, our target."""
    ours = columns[0][1]
    header = ["scenario", *(fw.key for fw, _ in columns)]
    if ratios:
        header += [f"ours / {fw.key}" for fw, _ in columns[1:]]
    header.append("target (ours)")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, label, unit, target in ROWS:
        cells = [f"{label} ({unit})"]
        for _, figures in columns:
            cells.append(_cell(figures, key))
        if ratios:
            for _, figures in columns[1:]:
                a, b = ours.get(key), figures.get(key)
                ok = isinstance(a, (int, float)) and isinstance(b, (int, float)) and b
                cells.append(f"{a / b:.2f}" if ok and unit not in ("x",) else "")
        if key == "peak_pss_mb" and isinstance(ours.get("context_mb"), float):
            target = f"<= {1.5 * ours['context_mb'] + 150:.0f} MB"
        cells.append(target)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(figures: dict[str, Any], key: str) -> str:
    error = figures.get(f"{scenario_of(key)}:error")
    value = figures.get(key)
    if isinstance(value, (int, float)) and not error:
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    if error:
        return "n/a (" + str(error).splitlines()[0][:70] + ")"
    return "—"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenario names")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    ctx = Contexts()
    compile_like_an_install()
    print(f"# rlmx harness benchmarks ({load_note()})", flush=True)
    figures = measure(RLMX, ctx, names, args.repeats, lambda s: print(s, flush=True))
    print(f"\nMedians of {args.repeats}; {load_note()} at the end.\n")
    print(table([(RLMX, figures)], ratios=False))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1, default=str))


if __name__ == "__main__":
    main()
