"""A scripted multi-turn model: fixed turns for the RLMs, fixed replies for everything else.

rlmx tells a model what each call is for (`CallSettings.purpose`, `.depth` and `.iteration`; over HTTP
to a loopback endpoint, the x-rlmx-* headers that `ScriptedRequest` reads), so a script never has to
recognise a call from its prompt text::

    model = ScriptedModel(
        root=["```repl\\nn = len(llm_query('how long?'))\\n```", "FINAL_VAR(n)"],
        sub="seven",                # or a function of the prompt: sub=lambda prompt: prompt.upper()
        final="FINAL(out of turns)",  # the reply when a limit asks for the forced final answer
    )
    RLM(model.lm()).run("q", "ctx")          # as an LM: a FunctionLM, no HTTP
    with ScriptedServer(model) as srv: ...   # as a server policy: the same script over HTTP
    assert [c.purpose for c in model.calls] == ["root", "llm_query", "root"]

What each purpose gets:

    root, correction    the RLM's turns: `root[iteration - 1]`; once they run out, the last one again
    child_root          `child[iteration - 1]` (the last one repeating) when `child` is given, else the
                        root's turns: every RLM in the tree follows the same script, as one model would
    final               `final` (the forced final answer, at any depth)
    llm_query, fallback `sub`: the text, or `sub(prompt)` with the prompt the code sent
    compaction          `compaction` (the summary of condensed turns)
    None                a call that does not say what it is for (a client other than rlmx): as `sub`

A turn, and `final`, is either text or a function `(messages, call) -> str`, where `call` has
`purpose`, `depth` and `iteration` (a `CallSettings` or a `ScriptedRequest`). The turn number is the
call's `iteration`; when the call does not carry one, the assistant messages in `messages` are counted.
Every call is recorded in `calls` (purpose, depth, iteration, prompt, reply), in the order made.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlmx.testing.models import FunctionLM

__all__ = ["SUB_PURPOSES", "TURN_PURPOSES", "CallInfo", "ScriptedCall", "ScriptedModel"]

TURN_PURPOSES = ("root", "child_root", "correction")  # a turn of an RLM (the forced final answer aside)
SUB_PURPOSES = ("llm_query", "fallback")  # plain calls made by model code


class CallInfo(Protocol):
    """What a call says about itself: `CallSettings` (as a FunctionLM gets it) and `ScriptedRequest`
    (as a ScriptedServer policy gets it) both have these."""

    @property
    def purpose(self) -> str | None: ...

    @property
    def depth(self) -> int | None: ...

    @property
    def iteration(self) -> int | None: ...


Messages = list[dict[str, Any]]
Turn = str | Callable[[Messages, CallInfo], str]
SubReply = str | Callable[[str], str]


@dataclass(frozen=True)
class ScriptedCall:
    """One call a ScriptedModel answered."""

    purpose: str | None
    depth: int | None
    iteration: int | None
    prompt: str  # the text of the call's last message
    reply: str


@dataclass
class ScriptedModel:
    """Turns for the RLMs, replies for sub-calls, compaction and the forced final answer; see the module
    docstring. Call it as `model(messages, call)`: that is both a FunctionLM's function and a
    ScriptedServer's policy."""

    root: Sequence[Turn]
    sub: SubReply = "sub-answer"
    final: Turn = "FINAL(forced)"
    child: Sequence[Turn] | None = None
    compaction: str = "(a summary of the earlier turns)"
    calls: list[ScriptedCall] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.root, str) or not self.root:
            raise ValueError("root must be a non-empty sequence of turns (a list of replies)")
        if self.child is not None and (isinstance(self.child, str) or not self.child):
            raise ValueError("child must be None or a non-empty sequence of turns")
        self.root = tuple(self.root)
        self.child = tuple(self.child) if self.child is not None else None

    def __call__(self, messages: Messages, call: CallInfo) -> str:
        text = self.reply(messages, call)
        prompt = str(messages[-1].get("content", "")) if messages else ""
        self.calls.append(ScriptedCall(call.purpose, call.depth, call.iteration, prompt, text))
        return text

    def reply(self, messages: Messages, call: CallInfo) -> str:
        """The reply to one call, without recording it."""
        purpose = call.purpose
        if purpose in TURN_PURPOSES:
            child = self.child is not None and (purpose == "child_root" or (call.depth or 0) > 0)
            turns = self.child if child and self.child is not None else self.root
            return _say(turns[min(_turn_index(messages, call), len(turns) - 1)], messages, call)
        if purpose == "final":
            return _say(self.final, messages, call)
        if purpose == "compaction":
            return self.compaction
        if purpose is None or purpose in SUB_PURPOSES:
            prompt = str(messages[-1].get("content", "")) if messages else ""
            return self.sub(prompt) if callable(self.sub) else self.sub
        raise ValueError(f"ScriptedModel has no reply for a call with purpose {purpose!r}")

    def lm(self, name: str = "scripted", latency_s: float = 0.0) -> FunctionLM:
        """This script as an LM (a FunctionLM): for runs without HTTP."""
        return FunctionLM(self, name=name, latency_s=latency_s)

    @property
    def purposes(self) -> list[tuple[str | None, int | None]]:
        """(purpose, depth) of every call so far, in order."""
        return [(c.purpose, c.depth) for c in list(self.calls)]


def _turn_index(messages: Messages, call: CallInfo) -> int:
    if call.iteration is not None:
        return max(call.iteration - 1, 0)
    return sum(1 for m in messages if m.get("role") == "assistant")


def _say(turn: Turn, messages: Messages, call: CallInfo) -> str:
    return turn(messages, call) if callable(turn) else turn
