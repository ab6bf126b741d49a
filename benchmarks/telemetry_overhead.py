"""What OpenTelemetry spans cost a run: the time of one turn with telemetry off (no tracer provider)
and on (the SDK's provider, a batching span processor and an exporter), medians of repeated runs, side
by side. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/telemetry_overhead.py [--turns 30] [--repeats 7] [--model http|function]
        [--exporter memory|otlp]   # otlp: to $OTEL_EXPORTER_OTLP_ENDPOINT (e.g. a local Phoenix)

Each turn is a root model call and a code cell making one sub-call (four spans: the turn, two model
calls, the cell). A third figure is the span sink's own CPU time a turn: a run's recorded events replayed
through it (with the SDK, the batching processor and an in-memory exporter), free of the model's and
the sandbox's time, so steady under load. `--model http`: the scripted OpenAI-compatible server on 127.0.0.1 (the default);
`function`: an in-process model (no HTTP: the harshest ratio). Each measurement runs in a fresh
process (a tracer provider is set once per process), off and on alternating.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULT = "RESULT "


def script(turns: int) -> Any:
    from rlmx.testing import ScriptedModel

    cell = "```repl\nx = llm_query('note ' + str(len(context)))\nprint(x)\n```"
    return ScriptedModel(root=[cell] * turns + ["FINAL(done)"], sub="a note")


def measure(turns: int, runs: int, model: str, telemetry: str, exporter: str) -> dict[str, Any]:
    """In this process: `runs` runs of `turns` turns after one warm-up; seconds per turn of each run."""
    from rlmx import RLM, Limits, ModelOptions
    from rlmx.testing import ScriptedServer

    spans = None
    if telemetry == "on":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        if exporter == "otlp":
            from rlmx.telemetry.sdk import exporter as otlp_exporter

            sink: Any = otlp_exporter()
        else:
            sink = spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(sink))
        trace.set_tracer_provider(provider)
    limits = Limits(max_iterations=turns + 2, max_llm_calls=10 * turns)
    context = "lorem ipsum " * 1000
    per_turn = []

    def one(rlm_for: Any) -> None:
        rlm = rlm_for(script(turns))
        started = time.perf_counter()
        result = rlm.run("Count the notes.", context)
        elapsed = time.perf_counter() - started
        assert result.stopped_by == "final", result.error
        per_turn.append(elapsed / (turns + 1))

    if model == "function":

        def rlm_for(s: Any) -> Any:
            return RLM(s.lm(), limits=limits, trace=False)

        for _ in range(runs + 1):
            one(rlm_for)
    else:
        for _ in range(runs + 1):
            with ScriptedServer(script(turns)) as srv:
                one(
                    lambda s: RLM(
                        "openai:scripted",
                        model_options=ModelOptions(base_url=srv.url),
                        limits=limits,
                        trace=False,
                    )
                )
    if telemetry == "on":
        provider.force_flush()
        provider.shutdown()
    return {"per_turn_s": per_turn[1:], "spans": len(spans.get_finished_spans()) if spans else None}


def replay(turns: int, times: int) -> dict[str, Any]:
    """In this process: the sink's CPU seconds a turn, replaying one run's events `times` times."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from rlmx import RLM, Limits
    from rlmx.telemetry.spans import SpanSink

    events: list[Any] = []
    limits = Limits(max_iterations=turns + 2, max_llm_calls=10 * turns)
    RLM(script(turns).lm(), limits=limits, trace=False, on_event=events.append).run("q", "lorem " * 1000)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)

    def once() -> None:
        sink = SpanSink()
        for event in events:
            sink(event)

    for _ in range(5):
        once()
    samples = []
    for _ in range(times):
        started = time.process_time()  # every thread's: the batching processor's export thread too
        for _ in range(10):
            once()
        provider.force_flush()
        samples.append((time.process_time() - started) / 10 / (turns + 1))
    provider.shutdown()
    return {"per_turn_s": samples, "spans": None}


def child(args: argparse.Namespace, telemetry: str) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        telemetry,
        "--turns",
        str(args.turns),
        "--runs",
        str(args.runs),
    ]
    cmd += ["--model", args.model, "--exporter", args.exporter, "--repeats", str(args.repeats)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    line = next((x for x in proc.stdout.splitlines() if x.startswith(RESULT)), None)
    if line is None:
        raise RuntimeError(f"the {telemetry} measurement failed: {proc.stderr[-2000:]}")
    return dict(json.loads(line[len(RESULT) :]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3, help="runs per process (after one warm-up)")
    parser.add_argument("--repeats", type=int, default=7, help="processes per mode, off and on alternating")
    parser.add_argument("--model", choices=("http", "function"), default="http")
    parser.add_argument("--exporter", choices=("memory", "otlp"), default="memory")
    parser.add_argument("--child", choices=("on", "off", "replay"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        from rlmx.testing import forbid_real_providers

        forbid_real_providers()
        if args.child == "replay":
            print(RESULT + json.dumps(replay(args.turns, args.repeats)))
            return
        print(RESULT + json.dumps(measure(args.turns, args.runs, args.model, args.child, args.exporter)))
        return
    samples: dict[str, list[float]] = {"off": [], "on": []}
    spans = None
    for _ in range(args.repeats):
        for mode in ("off", "on"):
            got = child(args, mode)
            samples[mode].append(statistics.median(got["per_turn_s"]))
            spans = got["spans"] if mode == "on" else spans
    off, on = statistics.median(samples["off"]), statistics.median(samples["on"])
    print(
        f"model {args.model}, exporter {args.exporter}, {args.turns} turns a run, {args.repeats} x {args.runs} runs a mode"
    )
    print(f"{'telemetry':<10} {'median ms/turn':>15} {'min':>8} {'max':>8}")
    for mode in ("off", "on"):
        values = [v * 1000 for v in samples[mode]]
        print(f"{mode:<10} {statistics.median(values):>15.3f} {min(values):>8.3f} {max(values):>8.3f}")
    print(f"overhead: {(on - off) * 1000:+.3f} ms a turn ({(on / off - 1) * 100:+.1f} %)")
    if spans is not None:
        print(f"spans exported by one process: {spans}")
    sink = statistics.median(child(args, "replay")["per_turn_s"])
    print(
        f"the span sink's own CPU time: {sink * 1000:.3f} ms a turn ({sink / off * 100:.1f} % of a turn off)"
    )


if __name__ == "__main__":
    main()
