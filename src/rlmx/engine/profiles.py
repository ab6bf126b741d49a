"""Prompt profiles: what the root model is told and the shape of every message it gets.

`rlmx` (the default) teaches FINAL / FINAL_VAR beside the `answer` dict and sends one user message per
turn with the outputs and the calls left. `official` gives a checkpoint trained on the official RLM
repository the message shapes it was trained on: the `answer` dict as the only termination taught, a
`Turn i/N:` user message before every turn (the first with a reminder to look at the context), feedback
as each block's output then a `REPL variables: [...]` line, and only ```` ```repl ```` blocks run. A
template file of your own uses the same placeholders as the built-ins (`{{sub_model}}`,
`{{sub_window}}`, `{{rlm_query_behaviour}}`, `{{limits}}`, and `{{tools}}` for where the user's tools
are described: without it they follow the template's text) and the `rlmx` message shapes, or the
`official` ones when its first line is `<!-- dialect: official -->`. Every run names its profile in the
trace's `run_start`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rlmx.engine.parse import RUNNABLE
from rlmx.errors import ConfigError
from rlmx.limits import Limits
from rlmx.prompts import fill, load, turn_header
from rlmx.sandbox.base import ExecResult

SYSTEM_PROMPT_VERSION = 3  # keep in step with the header of prompts/system.md
Dialect = Literal["rlmx", "official"]
BUILT_IN = {"rlmx": "system.md", "official": "official.md"}
OFFICIAL_RUNNABLE = frozenset({"repl"})


@dataclass(frozen=True)
class PromptProfile:
    name: str  # "rlmx", "official", or the template file's path
    dialect: Dialect
    template: str
    append: str = ""  # --system-prompt-append

    @classmethod
    def of(cls, spec: str | PromptProfile | None = None, *, append: str = "") -> PromptProfile:
        """`rlmx` / `official`, or a template file's path (ConfigError naming it when it cannot be read)."""
        if isinstance(spec, PromptProfile):
            return spec
        name = spec or "rlmx"
        if name in BUILT_IN:
            return cls(name, "official" if name == "official" else "rlmx", load(BUILT_IN[name]), append)
        path = Path(name).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"prompt profile {name!r} is neither 'rlmx', 'official' nor a readable template file "
                f"({exc.strerror or exc})"
            ) from exc
        dialect: Dialect = "official" if text.startswith("<!-- dialect: official -->") else "rlmx"
        if text.startswith("<!--"):
            text = text.split("-->", 1)[1].lstrip("\n")
        return cls(str(path), dialect, text, append)

    @property
    def runnable(self) -> frozenset[str]:
        return OFFICIAL_RUNNABLE if self.dialect == "official" else frozenset(RUNNABLE)

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

    def opening(self, meta: str, question: str) -> str:
        """The first user message: the question and what the context is."""
        if self.dialect == "official":
            return f"Answer the following: {question}\n\n{meta}"
        return f"{meta}\n\nQuestion: {question}"

    def turn_prompt(self, iteration: int, max_iterations: int) -> str | None:
        """The user message before a turn (official only): `Turn i/N:`, the first with a reminder."""
        if self.dialect != "official":
            return None
        body = f"Turn {iteration}/{max_iterations}:"
        if iteration == 1:
            return (
                "You have not looked at the context or used the REPL yet. Look at the context first; "
                f"do not give a final answer yet.\n\n{body}"
            )
        return body

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
            notes = [*notes, skipped_note(skipped, self.dialect)]
        if self.dialect == "official":
            return official_feedback(results, notes)
        parts = [rlmx_block(i, len(results), r) for i, r in enumerate(results, 1)] + notes
        return turn_header(iteration, max_iterations, calls_left) + "\n" + "\n\n".join(parts)

    def no_code(self) -> str:
        if self.dialect == "official":
            return (
                "Your reply had no ```repl block. Write code in a ```repl block to explore the context, or "
                'finish by setting answer["content"] and then answer["ready"] = True in one.'
            )
        return (
            "Your reply had no ```repl code block and no FINAL(...) line. Write code to explore the context, "
            "or finish with FINAL(answer) / FINAL_VAR(name)."
        )

    def forced_final(self, reason: str) -> str:
        if self.dialect == "official":
            return (
                f"The task has reached a limit ({reason}). Give your answer now from what you have found: "
                'one ```repl block that sets answer["content"] and then answer["ready"] = True. Do not call '
                "llm_query or rlm_query."
            )
        return (
            f"The run has reached a limit ({reason}). Do not write any more code. Answer the question now "
            "from what you have found so far, on a line of its own: FINAL(your answer)"
        )


def skipped_note(count: int, dialect: Dialect) -> str:
    which = "only ```repl blocks run" if dialect == "official" else "only ```repl and ```python blocks run"
    return f"[{count} code block(s) in another language were not run: {which}]"


def rlmx_block(index: int, total: int, result: ExecResult) -> str:
    label = f"Output of code block {index}/{total}" if total > 1 else "Output"
    body = result.output.rstrip() or ("(no output)" if result.error is None else "")
    if result.error:
        body = (body + "\n" if body else "") + result.error
    return f"{label}:\n{body}"


def official_feedback(results: list[ExecResult], notes: list[str]) -> str:
    """Each block's output then its error as `Type: message`, then the REPL's variables; a header per
    block when several ran."""
    parts = []
    for index, result in enumerate(results, 1):
        pieces = [result.output.rstrip()] if result.output.strip() else []
        if result.error:
            pieces.append(error_line(result.error))
        if result.variables:
            pieces.append(f"REPL variables: {list(result.variables)}")
        body = "\n\n".join(pieces) if pieces else "No output"
        header = f"REPL output (block {index}):" if len(results) > 1 else "REPL output:"
        parts.append(f"{header}\n{body}")
    return "\n\n".join(parts + notes)


def error_line(error: str) -> str:
    """A traceback's last line (`KeyError: 'x'`): the exception as the official runtime shows it."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    return lines[-1] if lines else error


def rlm_query_behaviour(depth: int, max_depth: int, dialect: Dialect = "rlmx") -> str:
    if max_depth == 0:
        return "disabled in this run (max_depth=0): sub-calls of any kind raise an error."
    if depth + 1 < max_depth:
        if dialect == "official":
            return (
                f"start a child RLM (depth {depth + 1}) with its own REPL, whose `context` is the prompt you "
                "give it; use it for sub-tasks that themselves need code."
            )
        return (
            f"start a child RLM (depth {depth + 1}) with its own REPL, whose `context` is the one you pass as "
            "`context=` (or yours when None); use it for sub-tasks that themselves need code over a large text."
        )
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
