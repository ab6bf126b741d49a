"""Driver: one run of the official RLM (`rlms` 0.1.3), in its own virtual environment.

    benchmarks/.venvs/official/bin/python benchmarks/peers/official_driver.py '{"url": ..., ...}'

Defaults throughout (local REPL, its fixed 16 in flight for llm_query_batched); a trace only when
`trace_dir` is given (its RLMLogger writing JSONL there). Prints `RESULT {json}`.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time
from pathlib import Path

from rlm import RLM
from rlm.logger import RLMLogger


def main(spec: dict) -> dict:
    context = Path(spec["context_file"]).read_text() if spec.get("context_file") else ""
    trace_dir = spec.get("trace_dir")
    rlm = RLM(
        backend="openai",
        backend_kwargs={"model_name": "scripted", "base_url": spec["url"], "api_key": "x"},
        environment="local",
        max_iterations=spec.get("max_iterations", 30),
        logger=RLMLogger(log_dir=trace_dir) if trace_dir else None,
    )
    started = time.perf_counter()
    completion = rlm.completion(context, root_prompt=spec.get("question", "What is in the context?"))
    call_s = time.perf_counter() - started
    trace_bytes = sum(os.path.getsize(p) for p in glob.glob(f"{trace_dir}/*.jsonl")) if trace_dir else None
    return {"call_s": call_s, "answer": completion.response, "trace_bytes": trace_bytes}


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(json.loads(sys.argv[1])), default=str), flush=True)
