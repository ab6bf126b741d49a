"""A session's engine side: what one question of a session brings to its run (`SessionRun`, read by
`RLM.arun`), and what the model is told about the session in the question's first message."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlmx.context.context import Context
from rlmx.context.metadata import brief
from rlmx.context.payload import ContextPayload
from rlmx.engine.dialect import Dialect
from rlmx.engine.ledger import Ledger
from rlmx.engine.repl_handle import ReplHandle
from rlmx.sandbox.base import SandboxFactory

if TYPE_CHECKING:
    from rlmx.engine.node import Node


@dataclass
class SessionRun:
    """A session's shared pieces as one question's run uses them."""

    id: str
    ledger: Ledger  # session-wide; every question's ledger charges it too
    sandboxes: SandboxFactory  # the session's zygote: closed with the session, not with a run
    repl: ReplHandle  # the root's REPL, kept between questions
    context: Context | None = None  # context_0, the REPL's start value (None: no context yet)
    payload: ContextPayload | None = None  # what the REPL starts with, made by the first question's run
    note: str = ""  # this question's lines about the session, after the context's description
    root: Node | None = None  # the question's root RLM, set by the run (its messages become history_N)
    question: int = 0  # this question's number, from 1
    turn_note: str = ""  # lines each turn's message ends with (the strict official dialect's notes)
    mcp: Any = None  # the session's MCP servers (rlmx.mcp.run.McpRun), started by its first question

    @property
    def started(self) -> bool:
        """Whether the session's REPL has its start value (the first question's payload)."""
        return self.payload is not None

    def payload_for(self, make: Callable[[], ContextPayload]) -> ContextPayload:
        """The REPL's start value: made by the first question's run, the same object afterwards (the
        session's workers inherit the zygote's copy)."""
        if self.payload is None:
            self.payload = make()
        return self.payload

    def ran(self, root: Node) -> None:
        """A question's run ended: its root's messages become the next question's `history_N`."""
        self.root = root

    def last_messages(self) -> list[dict[str, Any]]:
        """The last question's root messages (empty when its run ended before it began)."""
        if self.root is None:
            return []
        return self.root.state.profile.dialect.kept_messages(list(self.root.history.messages))

    def trace_file(self, path: Path | None, *, given: bool) -> Path | None:
        """The question's trace file. A path given to the RLM would be one file for every question: each
        question gets its own beside it instead (`run.jsonl` -> `run.q1.jsonl`, `run.q2.jsonl`, ...)."""
        if path is None or not given:
            return path
        return path.with_name(f"{path.stem}.q{self.question}{path.suffix}")


def session_note(
    *, question: int, contexts: list[dict[str, Any]], histories: int, dialect: Dialect, restarted: bool
) -> str:
    """The lines a session's question adds to its first message: how many `context_N` and `history_N`
    the REPL holds, what `history` is, and whether the REPL lost its variables since the last question
    (none under a dialect that notes them in each turn's message instead)."""
    if dialect.notes_in_turns:
        return ""
    lines = [
        f"This is question {question + 1} of a session: the REPL keeps the variables your code made for "
        "earlier questions (SHOW_VARS() lists them)."
    ]
    if contexts:
        names = "; ".join(
            f"`context_{i}`{' (also `context`)' if i == 0 else ''}: {brief(stats)}"
            for i, stats in enumerate(contexts)
        )
        lines.append(f"Contexts in the REPL: {len(contexts)} -- {names}.")
    else:
        lines.append("Contexts in the REPL: 0.")
    if histories:
        names = ", ".join(f"`history_{i}`" for i in range(histories))
        which = dialect.session_history()
        lines.append(
            f"Earlier questions' message lists (system prompt included) in the REPL: {histories} -- "
            f"{names}; {which}."
        )
    else:
        lines.append("Earlier questions' message lists in the REPL: 0.")
    if restarted:
        lines.append(
            "The REPL was restarted since the last question: the variables made earlier were lost; the "
            "contexts and message lists above are loaded again."
        )
    return "\n\n" + "\n".join(lines)
