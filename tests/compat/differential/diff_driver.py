"""One scenario through an `rlms`-shaped API, run as a subprocess by the differential tests.

    RLMX_DIFF_SIDE=official <official venv>/bin/python diff_driver.py scenario.json
    RLMX_DIFF_SIDE=compat   <rlmx python>/bin/python    diff_driver.py scenario.json

The same file drives both sides: only the import differs (`rlm` or `rlmx.compat.rlms`, under the
official names). It builds `RLM(**scenario["rlm"])`, calls `completion` once per entry of
`scenario["calls"]` and writes what it saw as JSON to `scenario["result_file"]`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

if os.environ.get("RLMX_DIFF_SIDE") == "compat":
    import rlmx.compat.rlms as api
    from rlmx.compat.rlms.logger import RLMLogger
else:
    import rlm as api
    from rlm.logger import RLMLogger

LIMIT_FIELDS = (
    "spent",
    "budget",
    "elapsed",
    "timeout",
    "tokens_used",
    "token_limit",
    "error_count",
    "threshold",
    "last_error",
    "partial_answer",
)


def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(str(text).split())


def lookup(key: str) -> int:
    return {"alpha": 1, "beta": 2, "gamma": 3}.get(key, 0)


class Counter:
    """An object as a tool value: it cannot cross to an isolated REPL as data."""

    def __init__(self) -> None:
        self.n = 0

    def bump(self) -> int:
        self.n += 1
        return self.n


TOOL_SETS: dict[str, dict[str, Any]] = {
    "object": {"counter": Counter()},
    "basic": {
        "word_count": word_count,
        "lookup": {"tool": lookup, "description": "Look up the number of a Greek letter name."},
        "LIMIT": 3,
    },
}


def shape(value: Any) -> Any:
    """Keys of dicts (recursively), lengths of lists, type names of leaves."""
    if isinstance(value, dict):
        return {str(k): shape(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list):
        return [shape(v) for v in value[:1]] + ([f"... {len(value)} items"] if len(value) > 1 else [])
    return type(value).__name__


def without_url(run_metadata: Any) -> Any:
    """The run metadata with the scripted server's URL (a new port each run) blanked."""
    if not isinstance(run_metadata, dict):
        return run_metadata
    kwargs = run_metadata.get("backend_kwargs")
    if isinstance(kwargs, dict) and "base_url" in kwargs:
        run_metadata = {**run_metadata, "backend_kwargs": {**kwargs, "base_url": "<url>"}}
    return run_metadata


def trajectory(metadata: Any) -> Any:
    if not isinstance(metadata, dict):
        return None if metadata is None else type(metadata).__name__
    iterations = metadata.get("iterations") or []
    blocks = [b for it in iterations if isinstance(it, dict) for b in it.get("code_blocks") or []]
    calls = [c for b in blocks if isinstance(b, dict) for c in (b.get("result") or {}).get("rlm_calls") or []]
    return {
        "keys": sorted(metadata),
        "run_metadata": without_url(metadata.get("run_metadata")),
        "responses": [str(it.get("response"))[:60] for it in iterations if isinstance(it, dict)],
        "prompt_types": [type(it.get("prompt")).__name__ for it in iterations if isinstance(it, dict)],
        "rlm_call_keys": sorted({k for c in calls if isinstance(c, dict) for k in c}),
        "block_stdout": [str((b.get("result") or {}).get("stdout", "")).strip()[:80] for b in blocks],
        "block_stderr": [str((b.get("result") or {}).get("stderr", "")).strip()[-80:] for b in blocks],
        "block_locals": [sorted((b.get("result") or {}).get("locals") or {}) for b in blocks],
        "iterations": len(iterations),
        "iteration_keys": sorted({k for it in iterations if isinstance(it, dict) for k in it}),
        "final_answers": [it.get("final_answer") for it in iterations if isinstance(it, dict)],
        "code_block_keys": sorted({k for b in blocks if isinstance(b, dict) for k in b}),
        "result_keys": sorted({k for b in blocks if isinstance(b, dict) for k in (b.get("result") or {})}),
    }


def completion_record(result: Any) -> dict[str, Any]:
    usage = result.usage_summary
    usage_dict = usage.to_dict() if hasattr(usage, "to_dict") else usage
    return {
        "class": type(result).__name__,
        "response": result.response
        if isinstance(result.response, (str, int, float, bool))
        else repr(result.response),
        "response_type": type(result.response).__name__,
        "prompt_repr": repr(result.prompt)[:120],
        "root_model": result.root_model,
        "prompt_type": type(result.prompt).__name__,
        "usage_summary": usage_dict,
        "execution_time_type": type(result.execution_time).__name__,
        "metadata": trajectory(result.metadata),
        "error": getattr(result, "error", "<missing>"),
        "to_dict_keys": sorted(result.to_dict()) if hasattr(result, "to_dict") else None,
    }


def exception_record(exc: BaseException) -> dict[str, Any]:
    fields = {f: getattr(exc, f) for f in LIMIT_FIELDS if hasattr(exc, f)}
    return {
        "type": type(exc).__name__,
        "official_name": getattr(api, type(exc).__name__, None) is type(exc),
        "is_value_error": isinstance(exc, ValueError),
        "fields": {
            k: v if isinstance(v, (str, int, float, bool, type(None))) else repr(v) for k, v in fields.items()
        },
        "message": str(exc),
    }


def log_files(log_dir: str | None) -> list[list[Any]] | None:
    if not log_dir:
        return None
    out = []
    for path in sorted(Path(log_dir).glob("*.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        out.append([[line.get("type"), sorted(line)] for line in lines])
        out.append([without_url({k: v for k, v in line.items() if k != "timestamp"}) for line in lines[:1]])
    return out


def main(spec: dict[str, Any]) -> dict[str, Any]:
    if spec.get("pid_file"):
        Path(spec["pid_file"]).write_text(str(os.getpid()))
    kwargs = dict(spec["rlm"])
    kwargs["backend_kwargs"] = {**kwargs.get("backend_kwargs", {}), "base_url": spec["url"]}
    if kwargs.get("other_backend_kwargs"):
        kwargs["other_backend_kwargs"] = [
            {**kw, "base_url": spec["url"]} for kw in kwargs["other_backend_kwargs"]
        ]
    if spec.get("tools"):
        kwargs["custom_tools"] = TOOL_SETS[spec["tools"]]
    events: list[list[Any]] = []
    if spec.get("callbacks"):
        kwargs["on_iteration_start"] = lambda depth, i: events.append(["iteration_start", depth, i])
        kwargs["on_iteration_complete"] = lambda depth, i, s: events.append(["iteration_complete", depth, i])
        kwargs["on_subcall_start"] = lambda depth, model, p: events.append(["subcall_start", depth, model])
        kwargs["on_subcall_complete"] = lambda depth, model, s, e: events.append(
            ["subcall_complete", depth, model, e]
        )
    logger = None
    if spec.get("logger") == "memory":
        logger = RLMLogger()
    elif spec.get("logger") == "dir":
        logger = RLMLogger(log_dir=spec["log_dir"])
    if logger is not None:
        kwargs["logger"] = logger
    calls: list[dict[str, Any]] = []
    with api.RLM(**kwargs) as rlm:
        for call in spec["calls"]:
            try:
                result = rlm.completion(call["prompt"], root_prompt=call.get("root_prompt"))
            except Exception as exc:
                calls.append({"exception": exception_record(exc)})
                break
            calls.append({"completion": completion_record(result)})
    return {"calls": calls, "events": events, "log_files": log_files(spec.get("log_dir"))}


if __name__ == "__main__":
    scenario = json.loads(Path(sys.argv[1]).read_text())
    out = main(scenario)
    Path(scenario["result_file"]).write_text(json.dumps(out, indent=1, default=repr))
