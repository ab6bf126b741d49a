"""The oracle: models that know each item's key. A scripted root writes the REPL program a sound RLM
would write; the oracle reader answers sub-calls and baseline prompts as a perfect reader of what is
visible in its prompt, optionally wrong with probability p (a noisy sub-model).

    oracle = Oracle(items, noise=Noise(0.1))
    root, reader = oracle.models_for(item)           # FunctionLMs, no HTTP
    with ScriptedServer(oracle.policy) as srv: ...   # the same behaviour over HTTP

Which of the two answers a call is decided by what the call says it is for (`purpose`, on the
FunctionLM's settings or the scripted server's request), never by its prompt text: an RLM's turn gets
the scripted program, the forced final answer after a limit gets FINAL(unknown), and everything else
(sub-calls, compaction, the baselines' calls, which carry no purpose) gets the reader.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rlmx.evals.items import EvalItem, Family, Noise
from rlmx.evals.prompting import NOTES_BUDGET, NOTES_MARKER
from rlmx.lm.base import CallSettings, Message
from rlmx.testing import CallInfo, FunctionLM
from rlmx.testing.scripted import TURN_PURPOSES


def _text(message: Message) -> str:
    return str(message.get("content", ""))


class Oracle:
    def __init__(self, items: Iterable[EvalItem] = (), *, noise: Noise | None = None) -> None:
        from rlmx.evals.registry import FAMILIES

        self.families: dict[str, Family] = FAMILIES
        self.noise = noise or Noise()
        self.items: dict[str, EvalItem] = {}
        for item in items:
            self.add(item)

    def add(self, item: EvalItem) -> None:
        self.items.setdefault(item.question, item)

    def find(self, text: str) -> EvalItem:
        """The item whose full question appears in the text (the longest one, if several do)."""
        hits = [
            item for question, item in list(self.items.items()) if question in text
        ]  # items may be added meanwhile
        if not hits:
            raise LookupError("the oracle knows no item whose question is in this prompt")
        return max(hits, key=lambda item: len(item.question))

    # --- replies ---------------------------------------------------------------------------------------
    def reply(self, messages: list[Message], call: CallInfo, item: EvalItem | None = None) -> str:
        """The reply to one call; `call` says what it is for (`CallSettings` or a `ScriptedRequest`)."""
        if call.purpose == "final":
            return "FINAL(unknown)"
        if call.purpose in TURN_PURPOSES:
            item = item or self.find(_text(messages[1]))
            return self.root_reply(messages, item)
        prompt = "\n".join(_text(m) for m in messages)
        return self.read(prompt, item or self.find(prompt))

    def root_reply(self, messages: list[Message], item: EvalItem) -> str:
        """The scripted program's next turn: one per reply the RLM has given so far, the last repeating."""
        turns = self.families[item.family].root_turns(item)
        done = sum(1 for m in messages if m.get("role") == "assistant")
        return turns[min(done, len(turns) - 1)]

    def read(self, prompt: str, item: EvalItem) -> str:
        family = self.families[item.family]
        if NOTES_MARKER in prompt:
            return self.notes(prompt, item, family)
        return family.oracle_reply(prompt, item, self.noise)

    def notes(self, prompt: str, item: EvalItem, family: Family) -> str:
        """A perfect note-taker: keeps every piece of evidence in view, in order, until the budget is full."""
        match = NOTES_BUDGET.search(prompt)
        budget = int(match.group(1)) if match else 4_000
        kept: list[str] = []
        used = 0
        for unit in dict.fromkeys(family.evidence(prompt, item)):
            if used + len(unit) + 1 > budget:
                break
            kept.append(unit)
            used += len(unit) + 1
        return "\n".join(kept) or "(nothing relevant yet)"

    # --- as models -------------------------------------------------------------------------------------
    def models_for(self, item: EvalItem) -> tuple[FunctionLM, FunctionLM]:
        """A scripted root and an oracle reader bound to one item (no prompt lookup needed)."""

        def root(messages: list[Message], settings: CallSettings) -> str:
            return self.reply(messages, settings, item)

        def reader(messages: list[Message], settings: CallSettings) -> str:
            return self.reply(messages, settings, item)

        return FunctionLM(root, name="oracle:root"), FunctionLM(reader, name="oracle:reader")

    def policy(self, messages: list[dict[str, Any]], request: CallInfo) -> str:
        """A ScriptedServer policy: finds the item from the question in the prompt."""
        return self.reply(messages, request)
