"""Driver: one rlmx run against the benchmark server, in a process of its own.

    python benchmarks/drivers/rlmx_driver.py '{"url": ..., "context_file": ..., "concurrency": 64, ...}'

Prints `RESULT {json}`: the time inside `RLM.run` and what the run returned.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from rlmx import RLM, Limits, ModelOptions


def main(spec: dict) -> dict:
    context = Path(spec["context_file"]).read_text() if spec.get("context_file") else None
    trace = spec.get("trace") or False
    rlm = RLM(
        "openai:scripted",
        model_options=ModelOptions(
            base_url=spec["url"], api_key="x", concurrency=spec.get("concurrency", 64)
        ),
        limits=Limits(
            max_llm_calls=spec.get("max_llm_calls", 2_000), max_iterations=spec.get("max_iterations", 30)
        ),
        trace=trace,
    )
    started = time.perf_counter()
    result = rlm.run(spec.get("question", "What is in the context?"), context)
    call_s = time.perf_counter() - started
    return {
        "call_s": call_s,
        "answer": result.answer,
        "stopped_by": result.stopped_by,
        "iterations": result.iterations,
        "error": result.error,
        "trace_bytes": os.path.getsize(trace) if trace else None,
    }


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(json.loads(sys.argv[1])), default=str), flush=True)
