"""Scripted depth-2 runs shared by the trace, viewer, progress and budget tests."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from policies import is_child, is_forced_final, is_rlm, repl, turn
from rlmx import RLM, Limits, ModelOptions
from rlmx.pricing import Price, Pricing
from rlmx.testing import CallInfo, Reply, ScriptedServer

SCRIPTED = "openai:scripted"
# Made-up prices for the scripted model, USD per million tokens (large, so budgets bite quickly).
SCRIPTED_PRICE = Price(input_per_mtok=100.0, output_per_mtok=400.0, cached_input_per_mtok=10.0)
OUTPUT_TOKENS = 40  # what the scripted model "writes" per reply (capped by the request's max_tokens)


def scripted_pricing() -> Pricing:
    return Pricing({SCRIPTED: SCRIPTED_PRICE})


def input_tokens_of(messages: list[dict[str, Any]]) -> int:
    """How many input tokens the scripted server reports: about 4 characters a token, like the
    engine's estimate (which also adds 4 per message), so the server never reports more than estimated."""
    return sum(math.ceil(len(m["content"]) / 4) for m in messages)


def output_tokens_of(body: dict[str, Any]) -> int:
    cap = body.get("max_tokens") or body.get("max_completion_tokens")
    return min(OUTPUT_TOKENS, int(cap)) if cap else OUTPUT_TOKENS


def root_turns(messages: list[dict[str, Any]], call: CallInfo) -> str:
    if is_forced_final(call):
        return "FINAL(forced answer)"
    t = turn(messages)
    if is_child(call):  # a child RLM at depth 1 (asked "child A" or "child B")
        if t == 0:
            return repl(
                "parts = llm_query_batched(['part one of ' + context[:20], 'part two'])\n"
                "deeper = rlm_query('deeper question')\nprint(parts, deeper)"
            )
        return "Done.\nFINAL_VAR(parts)"
    if t == 0:
        return repl(
            "notes = llm_query_batched(['note %d' % i for i in range(3)])\n"
            "answers = rlm_query_batched(['child A', 'child B'], contexts=['alpha text', 'beta text'])\n"
            "print(notes, answers)",
            "Let me delegate.",
        )
    return "All collected.\nFINAL_VAR(answers)"


def depth2_policy(messages: list[dict[str, Any]], request: Any) -> Reply:
    """Root and children follow `root_turns`; plain sub-calls answer 'leaf: <prompt start>'."""
    text = root_turns(messages, request) if is_rlm(request) else "leaf: " + messages[-1]["content"][:30]
    return Reply(text, input_tokens=input_tokens_of(messages), output_tokens=output_tokens_of(request.body))


def run_depth2(
    srv: ScriptedServer, trace: Path, *, limits: Limits | None = None, **kw: Any
) -> Any:  # RunResult
    rlm = RLM(
        SCRIPTED,
        model_options=ModelOptions(base_url=srv.url),
        limits=limits or Limits(max_depth=2),
        trace=trace,
        pricer=kw.pop("pricer", scripted_pricing()),
        **kw,
    )
    return rlm.run("What do the children find?", "root context: " + "lorem ipsum " * 50)
