"""What OpenTelemetry spans cost a run: the time of one turn with telemetry off and on, medians of
repeated runs, side by side. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/telemetry_overhead.py [--turns 30] [--runs 20] [--model http|function]
        [--exporter memory|otlp]   # otlp: to $OTEL_EXPORTER_OTLP_ENDPOINT (e.g. a local Phoenix)

Each turn is a root model call and a code cell making one sub-call (four spans: the turn, two model
calls, the cell). `--model http`: the scripted OpenAI-compatible server on 127.0.0.1 (the default);
`function`: an in-process model (no HTTP, so the shortest turn and the harshest ratio).

"on" is the SDK's tracer provider with a batching span processor and the exporter; "off" is the same
process's run without the span sink, which is what a run gets when no provider is set. The two
alternate run by run in one process, so the machine's load drifts over both alike. A third figure is
the span sink's own CPU time a turn: one run's recorded events replayed through it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))


def script(turns: int) -> Any:
    from rlmx.testing import ScriptedModel

    cell = "```repl\nx = llm_query('note ' + str(len(context)))\nprint(x)\n```"
    return ScriptedModel(root=[cell] * turns + ["FINAL(done)"], sub="a note")


def set_provider(exporter: str) -> Any:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    if exporter == "otlp":
        from rlmx.telemetry.sdk import exporter as otlp_exporter

        sink: Any = otlp_exporter()
    else:
        sink = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(sink))
    trace.set_tracer_provider(provider)
    return provider, sink


def measure(turns: int, runs: int, model: str) -> dict[str, list[float]]:
    """Seconds a turn of each run, by mode, after one warm-up run of each."""
    import rlmx.rlm
    from rlmx import RLM, Limits, ModelOptions
    from rlmx.testing import ScriptedServer

    with_sink = rlmx.rlm.run_sinks
    limits = Limits(max_iterations=turns + 2, max_llm_calls=10 * turns)
    context = "lorem ipsum " * 1000
    samples: dict[str, list[float]] = {"off": [], "on": []}
    srv = ScriptedServer(script(turns)) if model == "http" else None
    try:
        if srv is not None:
            srv.__enter__()
        for n in range(runs + 1):
            for mode in ("off", "on") if n % 2 == 0 else ("on", "off"):
                rlmx.rlm.run_sinks = with_sink if mode == "on" else lambda: []  # type: ignore[assignment,misc]
                if srv is not None:  # the script's turns follow from each run's messages: one serves all
                    rlm = RLM(
                        "openai:scripted",
                        model_options=ModelOptions(base_url=srv.url),
                        limits=limits,
                        trace=False,
                    )
                else:
                    rlm = RLM(script(turns).lm(), limits=limits, trace=False)
                started = time.perf_counter()
                result = rlm.run("Count the notes.", context)
                elapsed = time.perf_counter() - started
                assert result.stopped_by == "final", result.error
                if n:
                    samples[mode].append(elapsed / (turns + 1))
    finally:
        rlmx.rlm.run_sinks = with_sink
        if srv is not None:
            srv.__exit__(None, None, None)
    return samples


def replay(turns: int, times: int) -> float:
    """The span sink's median CPU seconds a turn (the batching processor's thread included)."""
    from rlmx import RLM, Limits
    from rlmx.telemetry.spans import SpanSink

    events: list[Any] = []
    limits = Limits(max_iterations=turns + 2, max_llm_calls=10 * turns)
    RLM(script(turns).lm(), limits=limits, trace=False, on_event=events.append).run("q", "lorem " * 1000)
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    samples = []
    for n in range(times + 1):
        started = time.process_time()
        for _ in range(10):
            sink = SpanSink()
            for event in events:
                sink(event)
        provider.force_flush()  # type: ignore[attr-defined]
        if n:
            samples.append((time.process_time() - started) / 10 / (turns + 1))
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--runs", type=int, default=20, help="runs of each mode, alternating")
    parser.add_argument("--model", choices=("http", "function"), default="http")
    parser.add_argument("--exporter", choices=("memory", "otlp"), default="memory")
    args = parser.parse_args()
    from rlmx.testing import forbid_real_providers

    forbid_real_providers()
    provider, exporter = set_provider(args.exporter)
    samples = measure(args.turns, args.runs, args.model)
    provider.force_flush()
    off, on = statistics.median(samples["off"]), statistics.median(samples["on"])
    print(f"model {args.model}, exporter {args.exporter}, {args.turns} turns a run, {args.runs} runs a mode")
    print(f"{'telemetry':<10} {'median ms/turn':>15} {'min':>8} {'max':>8}")
    for mode in ("off", "on"):
        values = [v * 1000 for v in samples[mode]]
        print(f"{mode:<10} {statistics.median(values):>15.3f} {min(values):>8.3f} {max(values):>8.3f}")
    print(f"overhead: {(on - off) * 1000:+.3f} ms a turn ({(on / off - 1) * 100:+.1f} %)")
    if args.exporter == "memory":
        print(f"spans exported: {len(exporter.get_finished_spans())}")
    sink = replay(args.turns, 10)
    print(
        f"the span sink's own CPU time: {sink * 1000:.3f} ms a turn ({sink / off * 100:.1f} % of a turn off)"
    )
    provider.shutdown()


if __name__ == "__main__":
    main()
