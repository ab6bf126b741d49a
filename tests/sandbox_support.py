"""Shared helpers of the sandbox and attack tests: scripted runs, trace records, the host's processes."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policies import is_forced_final, is_rlm, is_root, is_sub, last_user, repl
from rlmx import RLM, Limits, ModelOptions, RunResult, SandboxSettings
from rlmx.testing import ScriptedServer

QUESTION = "What is in the context?"
STILL_HERE = "still-here"
FOLLOW_UP = repl(f"print('{STILL_HERE}', len(context))")


@dataclass
class Outcome:
    result: RunResult
    requests: list[Any]
    trace: str
    sub_prompts: list[str] = field(default_factory=list)

    @property
    def bodies(self) -> str:
        """Everything the model server received in request bodies (headers are the host's own)."""
        return "\n".join(json.dumps(r.body, ensure_ascii=False) for r in self.requests)

    def said_after(self, n: int = 1) -> str:
        """What the REPL told the model after its n-th turn."""
        roots = [r for r in self.requests if is_root(r) and not is_forced_final(r)]
        return last_user(roots[n].messages) if len(roots) > n else ""

    @property
    def continued(self) -> bool:
        """The run went on after the attack: the next cell ran in a working REPL."""
        return any(STILL_HERE in last_user(r.messages) for r in self.requests if is_rlm(r))


def run_scripted(
    policy: Any,
    context: Any = "the context",
    *,
    sandbox: SandboxSettings | None = None,
    limits: Limits | None = None,
    trace_dir: Path | None = None,
) -> Outcome:
    with ScriptedServer(policy) as srv:
        rlm = RLM(
            "openai:scripted",
            model_options=ModelOptions(base_url=srv.url),
            sandbox=sandbox or SandboxSettings(),
            limits=limits or Limits(max_iterations=4, max_llm_calls=12),
            trace=True if trace_dir is None else trace_dir / "trace.jsonl",
        )
        result = rlm.run(QUESTION, context)
        requests = list(srv.requests)
    trace = Path(result.trace_path).read_text() if result.trace_path else ""
    subs = [r.messages[-1]["content"] for r in requests if is_sub(r)]
    return Outcome(result, requests, trace, subs)


def records(outcome: Outcome) -> list[dict[str, Any]]:
    return [json.loads(line) for line in outcome.trace.splitlines()]


def descendants(pid: int) -> set[int]:
    """Processes (not threads) under `pid`, from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def wait_no_descendants(pid: int, within_s: float = 10.0) -> set[int]:
    """The processes still under `pid` once they had `within_s` seconds to go (SIGKILLed ones need a moment)."""
    deadline = time.monotonic() + within_s
    left = descendants(pid)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = descendants(pid)
    return left
