"""The engine's prompts: the system prompt for a depth and its limits, the forced final answer, the
compaction request. The texts are data files in `rlmx/prompts/`."""

from __future__ import annotations

from rlmx.limits import Limits
from rlmx.prompts import fill, load

SYSTEM_PROMPT_VERSION = 2  # keep in step with the header of prompts/system.md


def rlm_query_behaviour(depth: int, max_depth: int) -> str:
    if max_depth == 0:
        return "disabled in this run (max_depth=0): sub-calls of any kind raise an error."
    if depth + 1 < max_depth:
        return (
            f"start a child RLM (depth {depth + 1}) with its own REPL, whose `context` is the one you pass "
            "(or yours when None); use it for sub-tasks that themselves need code over a large text."
        )
    return (
        f"at your depth ({depth}) and max_depth={max_depth} they fall back to plain `llm_query` calls "
        "(a given context is appended to the prompt)."
    )


def limits_text(limits: Limits, depth: int) -> str:
    parts = [f"- At most {limits.max_iterations} turns for you."]
    parts.append(f"- At most {limits.max_llm_calls} model calls for the whole run (yours and all sub-calls).")
    if limits.max_total_tokens:
        parts.append(f"- At most {limits.max_total_tokens} tokens for the whole run.")
    if limits.max_cost_usd:
        parts.append(f"- At most ${limits.max_cost_usd} for the whole run.")
    if limits.timeout_s:
        parts.append(f"- At most {limits.timeout_s:g} seconds for the whole run.")
    if limits.max_depth == 0:
        parts.append("- Sub-calls are disabled: `llm_query` and `rlm_query` raise an error.")
    return "\n".join(parts)


def system_prompt(*, depth: int, limits: Limits, sub_model: str, sub_window: int) -> str:
    return fill(
        load("system.md"),
        sub_model=sub_model,
        sub_window=sub_window,
        rlm_query_behaviour=rlm_query_behaviour(depth, limits.max_depth),
        limits=limits_text(limits, depth),
    )


FORCED_FINAL = (
    "The run has reached a limit ({reason}). Do not write any more code. Answer the question now from what "
    "you have found so far, on a line of its own: FINAL(your answer)"
)
NO_CODE = (
    "Your reply had no ```repl code block and no FINAL(...) line. Write code to explore the context, "
    "or finish with FINAL(answer) / FINAL_VAR(name)."
)


def compaction_request(question: str, summary: str | None, new_turns: str) -> list[dict[str, str]]:
    """The messages asking a model to fold older turns into the running summary (prompts/compaction.md)."""
    system, user = load("compaction.md").split("\n---\n", 1)
    text = fill(user, question=question, summary=summary or "(none)", new_turns=new_turns)
    return [{"role": "system", "content": system.strip()}, {"role": "user", "content": text.strip()}]
