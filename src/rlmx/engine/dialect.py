"""The prompt dialects, each one object: what differs between the `rlmx` and `official` profiles.

`rlmx` (the default) teaches FINAL / FINAL_VAR beside the `answer` dict and sends one user message per
turn with the outputs and the calls left. `official` is the official RLM repository's contract, for
checkpoints trained on it: the `answer` dict as the only termination taught, a `Turn i/N:` user
message before every turn (the first with a reminder to look at the context), feedback as each block's
output then a `REPL variables: [...]` line, only ```` ```repl ```` blocks run, an answer set by a block
that then raised still counts, and `rlm_query` without a context gives the child its prompt as context.

`official-strict` is the official runtime as `rlmx.compat.rlms` runs it (never chosen by name): only the
`answer` dict ends a run (no FINAL / FINAL_VAR in the REPL or in prose), every block of a reply runs, no
message for a reply without code, the feedback in the official layout (cut per block), the limits checked
between turns as the official does (`TurnLimits`), a final call only after the last turn (an assistant
message; the whole reply is the answer), compaction as one summary of the whole history, a session's
notes in each turn message, a child's failure returned as text, and an optional prologue message.
docs/dialects.md has the table.

A dialect is chosen once, from the prompt profile (`dialect_named`), and passed down: the engine asks
the object, never the name, and the worker gets its half (`repl`, an `rlmx.repl.dialect.ReplDialect`)
in its settings. This module is the only place a dialect's name is compared.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlmx.engine.parse import RUNNABLE
from rlmx.prompts import turn_header
from rlmx.repl import dialect as repl_dialect

if TYPE_CHECKING:
    from rlmx.engine.ledger import Ledger
    from rlmx.outcomes import LimitReason
    from rlmx.sandbox.base import ExecResult


@dataclass(frozen=True)
class Dialect:
    """The `rlmx` dialect; `OfficialDialect` overrides what the official contract does differently."""

    name: str = "rlmx"
    repl: repl_dialect.ReplDialect = repl_dialect.RLMX  # what it changes inside the REPL
    runnable: frozenset[str] = frozenset(RUNNABLE)  # the fence labels whose blocks run
    # an `answer` dict set ready by a block that then raised is turned down (the model is told why)
    rejects_answer_of_failed_block: bool = True
    child_context_is_prompt: bool = False  # rlm_query without a context: the child's context is its prompt
    honours_final_text: bool = True  # a FINAL(...) / FINAL_VAR(...) line in a reply's prose ends the run
    whole_reply_is_answer: bool = False  # the reply to the final call at a limit, unread, is the answer
    child_has_question: bool = True  # a child RLM is asked its prompt (else: its context holds the task)
    summary_replaces_turns: bool = False  # compaction: one summary stands for every turn so far
    # a session's contexts and histories are noted in each turn's message, not in the opening, and the
    # opening describes the context the question brought
    notes_in_turns: bool = False
    runs_every_block: bool = False  # the blocks after the one that answered run too (the first answer counts)
    child_failure_returned: bool = False  # rlm_query of a child that gave no answer returns "Error: ..."

    def __str__(self) -> str:
        return self.name

    # --- messages ------------------------------------------------------------------------------------
    def opening(self, meta: str, question: str | None) -> str:
        """The first user message: the question and what the context is (a run without a question: the
        context holds the task)."""
        if question is None:
            return f"{meta}\n\nNo separate question was given: the task is in the context."
        return f"{meta}\n\nQuestion: {question}"

    def prologue(self) -> list[dict[str, Any]]:
        """The root's user messages after the opening, before its first turn (none here)."""
        return []

    def describe(self, context: Any, meta: str) -> str:
        """The context's description in the opening (rlmx's `meta` here)."""
        return meta

    # --- limits --------------------------------------------------------------------------------------
    def stop_before_turn(self, ledger: Ledger) -> LimitReason | None:
        """A limit that stops the RLM before its next turn (none here: the ledger checks every call)."""
        return None

    def stop_after_turn(self, ledger: Ledger, failing_turns: int) -> LimitReason | None:
        """A limit the turn just made passed, checked before its answer is taken (none here)."""
        return None

    def asks_at(self, reason: str) -> bool:
        """Whether the RLM stopped by `reason` gets one more call asking for its answer."""
        return True

    def final_request(self, reason: str) -> dict[str, Any]:
        """The message that asks for the answer at a limit."""
        return {"role": "user", "content": self.forced_final(reason)}

    def turn_prompt(self, iteration: int, max_iterations: int) -> str | None:
        """The user message before a turn, if the dialect sends one."""
        return None

    def feedback(
        self,
        results: Sequence[ExecResult],
        notes: list[str],
        *,
        iteration: int,
        max_iterations: int,
        calls_left: int,
    ) -> str:
        """The user message after a turn: the blocks' outputs and the notes."""
        parts = [rlmx_block(i, len(results), r) for i, r in enumerate(results, 1)] + notes
        return turn_header(iteration, max_iterations, calls_left) + "\n" + "\n\n".join(parts)

    def skipped_note(self, count: int) -> str:
        return (
            f"[{count} code block(s) in another language were not run: only ```repl and ```python blocks run]"
        )

    def no_code(self) -> str:
        return (
            "Your reply had no ```repl code block and no FINAL(...) line. Write code to explore the context, "
            "or finish with FINAL(answer) / FINAL_VAR(name)."
        )

    def forced_final(self, reason: str) -> str:
        return (
            f"The run has reached a limit ({reason}). Do not write any more code. Answer the question now "
            "from what you have found so far, on a line of its own: FINAL(your answer)"
        )

    def rlm_query_child(self, depth: int) -> str:
        """The system prompt's line on what `rlm_query` starts, below the depth limit."""
        return (
            f"start a child RLM (depth {depth + 1}) with its own REPL, whose `context` is the one you pass as "
            "`context=` (or yours when None); use it for sub-tasks that themselves need code over a large text."
        )

    def session_history(self) -> str:
        """A session's note on what `history` is, once earlier questions' lists are in the REPL."""
        return "`history` holds this question's messages"

    def kept_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What of a question's root messages a session keeps as its `history_N` (all of them here)."""
        return messages

    def turn_notes(self, contexts: int, histories: int) -> str:
        """What each turn's message of a session's question ends with (nothing here)."""
        return ""


@dataclass(frozen=True)
class OfficialDialect(Dialect):
    name: str = "official"
    repl: repl_dialect.ReplDialect = repl_dialect.OFFICIAL
    runnable: frozenset[str] = frozenset({"repl"})
    rejects_answer_of_failed_block: bool = False
    child_context_is_prompt: bool = True  # as in the official runtime

    def opening(self, meta: str, question: str | None) -> str:
        return meta if question is None else f"Answer the following: {question}\n\n{meta}"

    def turn_prompt(self, iteration: int, max_iterations: int) -> str | None:
        """`Turn i/N:`, the first with a reminder."""
        body = f"Turn {iteration}/{max_iterations}:"
        if iteration == 1:
            return (
                "You have not looked at the context or used the REPL yet. Look at the context first; "
                f"do not give a final answer yet.\n\n{body}"
            )
        return body

    def feedback(
        self,
        results: Sequence[ExecResult],
        notes: list[str],
        *,
        iteration: int,
        max_iterations: int,
        calls_left: int,
    ) -> str:
        return official_feedback(results, notes)

    def skipped_note(self, count: int) -> str:
        return f"[{count} code block(s) in another language were not run: only ```repl blocks run]"

    def no_code(self) -> str:
        return (
            "Your reply had no ```repl block. Write code in a ```repl block to explore the context, or "
            'finish by setting answer["content"] and then answer["ready"] = True in one.'
        )

    def forced_final(self, reason: str) -> str:
        return (
            f"The task has reached a limit ({reason}). Give your answer now from what you have found: "
            'one ```repl block that sets answer["content"] and then answer["ready"] = True. Do not call '
            "llm_query or rlm_query."
        )

    def rlm_query_child(self, depth: int) -> str:
        return (
            f"start a child RLM (depth {depth + 1}) with its own REPL, whose `context` is the prompt you "
            "give it; use it for sub-tasks that themselves need code."
        )

    def session_history(self) -> str:
        return "`history` is `history_0`"


BLOCK_CHARS = 20_000  # the official runtime's cut of each block's part of the feedback


@dataclass(frozen=True)
class TurnLimits:
    """The official runtime's limits, checked between turns: before a turn, the time since the run
    started against `timeout_s`; after it, the consecutive failing turns against `max_errors`, the known
    cost (provider-reported) against `max_cost_usd`, the tokens (input + output) against
    `max_total_tokens`. A limit passed stops the RLM without asking for an answer."""

    timeout_s: float | None = None
    max_errors: int | None = None
    max_cost_usd: float | None = None
    max_total_tokens: int | None = None


@dataclass(frozen=True)
class StrictOfficialDialect(OfficialDialect):
    """The official runtime's own contract, for `rlmx.compat.rlms`; see the module docstring."""

    name: str = "official-strict"
    repl: repl_dialect.ReplDialect = repl_dialect.OFFICIAL_STRICT
    honours_final_text: bool = False
    whole_reply_is_answer: bool = True
    child_has_question: bool = False
    summary_replaces_turns: bool = True
    notes_in_turns: bool = True
    runs_every_block: bool = True
    child_failure_returned: bool = True
    limits: TurnLimits = field(default_factory=TurnLimits)
    user_prologue: str | None = None

    def prologue(self) -> list[dict[str, Any]]:
        return [{"role": "user", "content": self.user_prologue}] if self.user_prologue else []

    def describe(self, context: Any, meta: str) -> str:
        """A dict or list context's size counted as the official runtime counts it, first."""
        if not isinstance(context, (dict, list)):
            return meta
        kind = type(context).__name__
        prefix = f"Your context is a {kind} "
        rest = meta[len(prefix) :] if meta.startswith(prefix) else meta
        return f"{prefix}of {official_size(context)} total characters; {rest}"

    def stop_before_turn(self, ledger: Ledger) -> LimitReason | None:
        timeout = self.limits.timeout_s
        if timeout is not None and time.monotonic() - ledger.started > timeout:
            return "timeout"
        return None

    def stop_after_turn(self, ledger: Ledger, failing_turns: int) -> LimitReason | None:
        limits = self.limits
        if limits.max_errors is not None and failing_turns >= limits.max_errors:
            return "max_errors"
        if limits.max_cost_usd is not None and ledger.spent_usd > limits.max_cost_usd:
            return "max_cost_usd"
        if limits.max_total_tokens is not None and ledger.tokens_used() > limits.max_total_tokens:
            return "max_total_tokens"
        return None

    def asks_at(self, reason: str) -> bool:
        return reason == "max_iterations"

    def feedback(
        self,
        results: Sequence[ExecResult],
        notes: list[str],
        *,
        iteration: int,
        max_iterations: int,
        calls_left: int,
    ) -> str:
        """The official layout, spacing included: each part after a blank line, the variables last; a
        block's part cut at `BLOCK_CHARS` with a mark saying how much was left out."""
        parts = []
        for index, result in enumerate(results, 1):
            pieces = [f"\n{result.output}"] if result.output else []
            if result.error:
                pieces.append(f"\n\n{error_line(result.error)}")  # its stderr is "\n" + the error line
            if result.variables:
                pieces.append(f"REPL variables: {list(result.variables)}\n")
            body = "\n\n".join(pieces) if pieces else "No output"
            if len(body) > BLOCK_CHARS:
                body = body[:BLOCK_CHARS] + f"... + [{len(body) - BLOCK_CHARS} chars...]"
            header = f"REPL output (block {index}):" if len(results) > 1 else "REPL output:"
            parts.append(f"{header}\n{body}")
        return "\n\n".join(parts + [note for note in notes if note])

    def final_request(self, reason: str) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": "Give the final answer to the question now, from what the turns above found.",
        }

    def turn_notes(self, contexts: int, histories: int) -> str:
        notes = []
        if contexts > 1:
            notes.append(f"Note: the REPL holds {contexts} contexts, context_0 to context_{contexts - 1}.")
        if histories == 1:
            notes.append("Note: the REPL holds 1 earlier conversation's messages, in the `history` variable.")
        elif histories > 1:
            notes.append(
                f"Note: the REPL holds {histories} earlier conversations' messages, history_0 to "
                f"history_{histories - 1}."
            )
        return "".join("\n\n" + note for note in notes)

    def kept_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """As officially: the messages the last turn was sent, without the replies that ended it."""
        end = len(messages)
        while end and messages[end - 1].get("role") == "assistant":
            end -= 1
        return messages[:end]

    def no_code(self) -> str:
        return ""

    def skipped_note(self, count: int) -> str:
        return ""


RLMX = Dialect()
OFFICIAL = OfficialDialect()
STRICT_OFFICIAL = StrictOfficialDialect()
DIALECTS = {d.name: d for d in (RLMX, OFFICIAL)}


def dialect_named(name: str) -> Dialect:
    """The dialect called `name` (ValueError naming the known ones otherwise)."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"unknown dialect {name!r}; use one of {', '.join(DIALECTS)}") from None


def template_dialect(text: str) -> tuple[Dialect, str]:
    """A template file's dialect, from a first line `<!-- dialect: NAME -->` (else `rlmx`), and its text
    without a leading `<!-- ... -->` comment."""
    dialect = RLMX
    if text.startswith("<!--"):
        comment, _, rest = text.partition("-->")
        key, _, value = comment[4:].partition(":")
        if key.strip() == "dialect" and value.strip() in DIALECTS:
            dialect = DIALECTS[value.strip()]
        text = rest.lstrip("\n")
    return dialect, text


def official_size(context: dict[Any, Any] | list[Any]) -> int:
    """The official runtime's character count of a dict or list context: a text value by its length,
    another value by its JSON's (a message list: its contents' lengths)."""

    def size(value: Any) -> int:
        if isinstance(value, str):
            return len(value)
        try:
            return len(json.dumps(value, default=str))
        except (TypeError, ValueError):
            return len(repr(value))

    if isinstance(context, dict):
        return sum(size(v) for v in context.values())
    if context and isinstance(context[0], dict) and "content" in context[0]:
        return sum(len(str(item.get("content", ""))) for item in context if isinstance(item, dict))
    if context and isinstance(context[0], dict):
        return sum(size(item) for item in context)
    return sum(len(item) if hasattr(item, "__len__") else size(item) for item in context)


# --- the pieces of feedback -------------------------------------------------------------------------


def rlmx_block(index: int, total: int, result: ExecResult) -> str:
    label = f"Output of code block {index}/{total}" if total > 1 else "Output"
    body = result.output.rstrip() or ("(no output)" if result.error is None else "")
    if result.error:
        body = (body + "\n" if body else "") + result.error
    return f"{label}:\n{body}"


def official_feedback(results: Sequence[ExecResult], notes: list[str]) -> str:
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
    return "\n\n".join(parts + [note for note in notes if note])


def error_line(error: str) -> str:
    """A traceback's last line (`KeyError: 'x'`): the exception as the official runtime shows it."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    return lines[-1] if lines else error
