"""Prompt profiles: what the root model is told and the shape of every message it gets.

`rlmx` (the default) teaches FINAL / FINAL_VAR beside the `answer` dict and sends one user message per
turn with the outputs and the calls left. `official` gives a checkpoint trained on the official RLM
repository the message shapes it was trained on: the `answer` dict as the only termination taught, a
`Turn i/N:` user message before every turn (the first with a reminder to look at the context), feedback
as each block's output then a `REPL variables: [...]` line, and only ```` ```repl ```` blocks run. A
template file of your own uses the same placeholders as the built-ins (`{{sub_model}}`,
`{{sub_window}}`, `{{rlm_query_behaviour}}`, `{{limits}}`, and `{{tools}}` for where the user's tools
are described: without it they follow the template's text) and the `rlmx` message shapes, or the
`official` ones when its first line is `<!-- dialect: official -->`. What a dialect changes is one object
(`rlmx.engine.dialect`). Every run names its profile in the trace's `run_start`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlmx.engine.dialect import DIALECTS, Dialect, error_line, template_dialect
from rlmx.errors import ConfigError
from rlmx.limits import Limits
from rlmx.prompts import fill, load
from rlmx.sandbox.base import ExecResult

__all__ = ["PromptProfile", "error_line"]  # error_line: rlmx.engine.progress reads it from here

SYSTEM_PROMPT_VERSION = 3  # keep in step with the header of prompts/system.md
BUILT_IN = {"rlmx": "system.md", "official": "official.md"}  # a built-in profile's name is its dialect's


@dataclass(frozen=True)
class PromptProfile:
    name: str  # "rlmx", "official", or the template file's path
    dialect: Dialect  # what the profile's messages, fences and answers follow (rlmx.engine.dialect)
    template: str
    append: str = ""  # --system-prompt-append

    @classmethod
    def of(cls, spec: str | PromptProfile | None = None, *, append: str = "") -> PromptProfile:
        """`rlmx` / `official`, or a template file's path (ConfigError naming it when it cannot be read)."""
        if isinstance(spec, PromptProfile):
            return spec
        name = spec or "rlmx"
        if name in BUILT_IN:
            return cls(name, DIALECTS[name], load(BUILT_IN[name]), append)
        path = Path(name).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"prompt profile {name!r} is neither 'rlmx', 'official' nor a readable template file "
                f"({exc.strerror or exc})"
            ) from exc
        dialect, text = template_dialect(text)
        return cls(str(path), dialect, text, append)

    @property
    def runnable(self) -> frozenset[str]:
        return self.dialect.runnable

    # --- the opening -------------------------------------------------------------------------------
    def system_prompt(
        self, *, depth: int, limits: Limits, sub_model: str, sub_window: int, tools: str = ""
    ) -> str:
        """The template filled in; `tools` (the user's tools, described) goes where the template has
        `{{tools}}`, else after its text, so every profile names them."""
        text = fill(
            self.template,
            sub_model=sub_model,
            sub_window=sub_window,
            rlm_query_behaviour=rlm_query_behaviour(depth, limits.max_depth, self.dialect),
            limits=limits_text(limits),
        )
        if "{{tools}}" in text:
            text = fill(text, tools=tools)
        elif tools:
            text = text.rstrip("\n") + "\n\n" + tools
        return text.rstrip("\n") + ("\n\n" + self.append.strip() if self.append.strip() else "")

    def opening(self, meta: str, question: str | None) -> str:
        """The first user message: the question and what the context is."""
        return self.dialect.opening(meta, question)

    def turn_prompt(self, iteration: int, max_iterations: int) -> str | None:
        """The user message before a turn (official only): `Turn i/N:`, the first with a reminder."""
        return self.dialect.turn_prompt(iteration, max_iterations)

    # --- feedback after a turn ---------------------------------------------------------------------
    def feedback(
        self,
        results: list[ExecResult],
        notes: list[str],
        *,
        iteration: int,
        max_iterations: int,
        calls_left: int,
        skipped: int,
    ) -> str:
        if skipped:
            notes = [*notes, self.dialect.skipped_note(skipped)]
        return self.dialect.feedback(
            results, notes, iteration=iteration, max_iterations=max_iterations, calls_left=calls_left
        )

    def no_code(self) -> str:
        return self.dialect.no_code()

    def forced_final(self, reason: str) -> str:
        return self.dialect.forced_final(reason)


def rlm_query_behaviour(depth: int, max_depth: int, dialect: Dialect) -> str:
    if max_depth == 0:
        return "disabled in this run (max_depth=0): sub-calls of any kind raise an error."
    if depth + 1 < max_depth:
        return dialect.rlm_query_child(depth)
    return (
        f"at your depth ({depth}) and max_depth={max_depth} they fall back to plain `llm_query` calls "
        "(a given context is appended to the prompt)."
    )


def limits_text(limits: Limits) -> str:
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


def sample(profile: PromptProfile, limits: Limits | None = None) -> dict[str, Any]:
    """The profile filled for a sample run (for `rlmx prompts show`)."""
    limits = limits or Limits(max_depth=2)
    return {
        "system": profile.system_prompt(
            depth=0, limits=limits, sub_model="openai:gpt-5-nano", sub_window=400_000
        ),
        "opening": profile.opening(
            "Your context is a str of 1,200,000 characters (about 300,000 tokens).", "QUESTION"
        ),
        "turn": profile.turn_prompt(1, limits.max_iterations),
        "forced_final": profile.forced_final("max_iterations"),
    }


def compaction_request(question: str, summary: str | None, new_turns: str) -> list[dict[str, str]]:
    """The messages asking a model to fold older turns into the running summary (prompts/compaction.md)."""
    system, user = load("compaction.md").split("\n---\n", 1)
    text = fill(user, question=question, summary=summary or "(none)", new_turns=new_turns)
    return [{"role": "system", "content": system.strip()}, {"role": "user", "content": text.strip()}]
