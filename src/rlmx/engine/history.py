"""The root's message history, condensed once it passes a share of the model's window.

The full history is kept (and mirrored into the REPL as `history`); what is sent to the model is the
system prompt, the question, a running summary and condensed code of older turns, and the recent turns
verbatim. The condensed prefix is rebuilt only when compaction happens, never per turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlmx.engine.parse import parse_reply
from rlmx.limits import HistorySettings
from rlmx.lm.base import Message, estimate_tokens
from rlmx.repl.dialect import SEGMENT


@dataclass
class History:
    settings: HistorySettings
    window_tokens: int
    messages: list[Message] = field(default_factory=list)  # everything, in order
    head: int = 2  # system + question are always sent
    compacted_upto: int = 2  # messages[head:compacted_upto] are represented by `condensed`
    condensed: list[Message] = field(default_factory=list)
    summary: str = ""
    mirrored: int = 0  # messages already copied into the REPL's `history` variable
    logged: int = 0  # messages already written to the trace
    compactions: int = 0  # how many times the history was compacted
    # the REPL's `history` gets one entry per turn (its reply and output, a list) and one per summary
    # (`{"type": "summary", "content": ...}`) instead of the messages, as in the official runtime
    segments: bool = False
    entries: list[Any] = field(default_factory=list)
    _chars: int = 0  # size of what for_model() returns, kept incrementally

    def append(self, message: Message) -> None:
        self.messages.append(message)
        self._chars += len(str(message["content"]))

    def for_model(self) -> list[Message]:
        """What is sent to the model: the head, the condensed older turns, the recent turns verbatim."""
        return self.messages[: self.head] + self.condensed + self.messages[self.compacted_upto :]

    def take_unmirrored(self) -> list[Any]:
        """The messages (or, with `segments`, the entries) the REPL's `history` does not have yet; from
        now on it has them."""
        source: list[Any] = self.entries if self.segments else self.messages
        new = source[self.mirrored :]
        self.mirrored = len(source)
        return new

    def add_entry(self, entry: Any) -> None:
        """One entry of the REPL's `history` under `segments` (nothing otherwise)."""
        if self.segments:
            self.entries.append({SEGMENT: entry} if isinstance(entry, list) else entry)

    def unlogged(self) -> list[Message]:
        """The messages no trace record holds yet."""
        return self.messages[self.logged :]

    def mark_logged(self, *, reply: bool = True) -> None:
        """Everything so far is in the trace (and the reply about to be appended, with `reply`)."""
        self.logged = len(self.messages) + (1 if reply else 0)

    def view_tokens(self) -> int:
        return estimate_tokens(self._chars) + 4 * (len(self.condensed) + len(self.messages))

    def needs_compaction(self, *, whole: bool = False) -> bool:
        """Past `compact_at` of the window with turns to condense (`whole`: with any turn since the last
        compaction, all of them summarised, at `compact_at` or more, as the official runtime does)."""
        threshold = self.settings.compact_at * self.window_tokens
        if whole:
            fresh = len(self.messages) > self.compacted_upto or not self.compactions
            return self.view_tokens() >= threshold and fresh
        keep = 2 * self.settings.keep_recent_turns
        return self.view_tokens() > threshold and len(self.messages) - keep > self.compacted_upto

    def turns_to_condense(self) -> list[Message]:
        end = len(self.messages) - 2 * self.settings.keep_recent_turns
        return self.messages[self.compacted_upto : end]

    def replace_with_summary(self, summary: str, note: str) -> None:
        """Every turn so far is represented by `summary` (an assistant message) and `note` (a user one)."""
        self.condensed = [{"role": "assistant", "content": summary}, {"role": "user", "content": note}]
        self.compacted_upto = len(self.messages)
        self.compactions += 1
        self.add_entry({"type": "summary", "content": summary})
        self._chars = sum(len(str(m["content"])) for m in self.for_model())

    def compact(self, summary: str | None) -> None:
        """Condense all but the recent turns: code kept, outputs shortened, a running summary on top."""
        end = len(self.messages) - 2 * self.settings.keep_recent_turns
        limit = self.settings.condensed_output_chars
        old_condensed = self.condensed[1:] if self.condensed else []
        new_parts: list[Message] = []
        for message in self.messages[self.compacted_upto : end]:
            text = str(message["content"])
            if message["role"] == "assistant":
                code = parse_reply(text).code_blocks
                body = "\n".join(f"```repl\n{c.rstrip()}\n```" for c in code) if code else text[:limit]
                new_parts.append({"role": "assistant", "content": body})
            else:
                short = (
                    text
                    if len(text) <= limit
                    else text[:limit] + f" [... {len(text) - limit} characters condensed]"
                )
                new_parts.append({"role": "user", "content": short})
        if summary is not None:
            self.summary = summary
        header = (
            "[Earlier turns were condensed to save space: their code is kept, their outputs shortened. "
            "The full history is in the REPL variable `history`.]"
        )
        if self.summary:
            header += "\nSummary of the work so far:\n" + self.summary
        self.condensed = [{"role": "user", "content": header}, *old_condensed, *new_parts]
        # Drop the oldest condensed turns if the condensed part alone is still too large.
        budget_chars = int(self.settings.compact_at * self.window_tokens * 4 * 0.5)
        while len(self.condensed) > 3 and sum(len(str(m["content"])) for m in self.condensed) > budget_chars:
            del self.condensed[1:3]
        self.compacted_upto = end
        self.compactions += 1
        self._chars = sum(len(str(m["content"])) for m in self.for_model())
