"""Test models: an LM made from a plain function, for tests without any HTTP (`ScriptedModel`, in
`rlmx.testing.scripted`, is a ready-made function for it)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from rlmx.lm.base import CallSettings, LMResponse, Message, Usage, estimate_tokens

Reply = "str | LMResponse"
ModelFunction = Callable[[list[Message], CallSettings], "str | LMResponse | Awaitable[str | LMResponse]"]


@dataclass
class FunctionLM:
    """An LM whose replies come from `fn(messages, settings)` (sync or async).

    `settings` says what the call is for: `settings.purpose` ("root", "child_root", "llm_query",
    "fallback", "compaction", "final" for the forced final answer, "correction" for a root turn after a
    rejected typed answer), `settings.depth` (0: the root RLM; a sub-call is one level below the RLM
    whose code made it) and `settings.iteration` (that RLM's turn, from 1; None on sub-calls).

    Usage is estimated from the text (about 4 characters a token) unless `fn` returns an LMResponse.
    Every call is recorded: its messages in `calls`, its settings in `call_settings` (same order).
    """

    fn: ModelFunction
    name: str = "function:test"
    latency_s: float = 0.0
    calls: list[list[Message]] = field(default_factory=list)
    call_settings: list[CallSettings] = field(default_factory=list)

    async def complete(self, messages: list[Message], settings: CallSettings) -> LMResponse:
        self.calls.append(messages)
        self.call_settings.append(settings)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        reply = self.fn(messages, settings)
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, LMResponse):
            return reply
        text = str(reply)
        usage = Usage(
            input_tokens=sum(estimate_tokens(str(m.get("content", ""))) for m in messages),
            output_tokens=estimate_tokens(text),
        )
        return LMResponse(text=text, usage=usage, model=self.name)
