"""The scripted model of the differential tests: one policy that answers both sides alike.

It decides from the messages alone (never from rlmx's x-rlmx-* headers, which the official client does
not send), so the same script meets the official runtime and `rlmx.compat.rlms` the same way:

- no system message: a plain call (`llm_query`, a call at the depth cap) -> `sub`
- the last message is an assistant message: the runtime's own line asking for a final answer (the
  official out-of-iterations path) -> `final`
- the last message is a user message without a `Turn i/N:` line (every turn's request ends with one):
  the request for a summary of the progress so far -> `summary` (compaction)
- otherwise a turn of an RLM: `root[i]` for the i-th root turn served (the last one repeating), or
  `child[i]` when `child` is given and no message carries `root_marker` (a child RLM's turn)

Every reply reports fixed token counts (and a cost when given), so usage and limits compare exactly.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlmx.testing import Reply

TURN_LINE = re.compile(r"^Turn \d+/\d+:$", re.M)


def first_line(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def kind_of(messages: list[dict[str, Any]], root_marker: str | None) -> str:
    if not messages or not any(m["role"] == "system" for m in messages):
        return "sub"
    last = messages[-1]
    if last["role"] == "assistant":  # the runtime's own line asking for the answer, as an assistant turn
        return "final"
    if not TURN_LINE.search(str(last["content"])):  # every turn ends with its `Turn i/N:` message
        return "summary"
    if root_marker is not None and not any(root_marker in str(m["content"]) for m in messages):
        return "child"
    return "root"


@dataclass
class Script:
    root: list[str]
    sub: str | Callable[[str], str] = "sub-answer"
    child: list[str] | None = None
    root_marker: str | None = None
    final: str = "final-from-history"
    summary: str = "Summary: nothing computed yet."
    root_delay_s: float = 0.0
    tokens: tuple[int, int] = (100, 10)
    cost: float | None = None  # reported as usage.cost on every reply (OpenRouter style)
    on_root: Callable[[int], None] | None = None  # called with each root turn's index before it is answered
    served: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, messages: list[dict[str, Any]], request: Any) -> Reply:
        kind = kind_of(messages, self.root_marker if self.child is not None else None)
        with self._lock:
            index = self.served.get(kind, 0)
            self.served[kind] = index + 1
        if kind == "root":
            if self.on_root is not None:
                self.on_root(index)
            if self.root_delay_s:
                time.sleep(self.root_delay_s)
            text = self.root[min(index, len(self.root) - 1)]
        elif kind == "child" and self.child is not None:
            text = self.child[min(index, len(self.child) - 1)]
        elif kind == "summary":
            text = self.summary
        elif kind == "final":
            text = self.final
        else:
            prompt = str(messages[-1]["content"]) if messages else ""
            text = self.sub(prompt) if callable(self.sub) else self.sub
        return Reply(text, input_tokens=self.tokens[0], output_tokens=self.tokens[1], cost=self.cost)
