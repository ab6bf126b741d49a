"""Driver: one run of `dspy.RLM` (DSPy 3.4.1), in its own virtual environment.

    benchmarks/.venvs/dspy/bin/python benchmarks/peers/dspy_driver.py '{"url": ..., "interpreter": "default"}'

`interpreter`: "default" is DSPy's sandbox (Deno + Pyodide); "local" is its `LocalInterpreter`, a plain
subprocess that DSPy documents as not a security sandbox. Prints `RESULT {json}`; when the interpreter
cannot start, `error` says why.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import dspy


def main(spec: dict) -> dict:
    context = Path(spec["context_file"]).read_text() if spec.get("context_file") else ""
    lm = dspy.LM("openai/scripted", api_base=spec["url"], api_key="x", cache=False, num_retries=0)
    dspy.configure(lm=lm)
    kwargs = {}
    if spec.get("interpreter") == "local":
        from dspy.primitives.local_interpreter import LocalInterpreter

        kwargs["interpreter_factory"] = LocalInterpreter
    rlm = dspy.RLM(
        "context, query -> answer",
        max_iters=spec.get("max_iterations", 30),
        max_llm_calls=spec.get("max_llm_calls", 2_000),
        **kwargs,
    )
    started = time.perf_counter()
    try:
        prediction = rlm(context=context, query=spec.get("question", "What is in the context?"))
    except Exception as exc:
        return {"call_s": time.perf_counter() - started, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    return {"call_s": time.perf_counter() - started, "answer": prediction.answer}


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(json.loads(sys.argv[1])), default=str), flush=True)
