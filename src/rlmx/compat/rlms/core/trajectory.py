"""A completion as the official package reports it, read from rlmx's trace events: the root's turns as
`RLMIteration`s (the messages sent, the reply, each block's output and sub-calls), usage by model, the
replies (for `partial_answer`) and the last error of a block."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlmx.compat.rlms.core.types import (
    CodeBlock,
    ModelUsageSummary,
    REPLResult,
    RLMChatCompletion,
    RLMIteration,
    UsageSummary,
)
from rlmx.engine.dialect import error_line
from rlmx.trace.events import ChildEnd, ChildStart, Event, Exec, ExecStart, LMCall, excerpt_text

ROOT_TURNS = ("root", "final", "correction")  # the root's own calls that are turns
ROOT_HANDLER = ("root", "final", "correction", "compaction", "llm_query", "fallback")


@dataclass
class Trajectory:
    """Every event of one completion (an `on_event` sink), and what the official reports of them."""

    names: dict[str, str]  # rlmx model name -> the name the official reports (its model_name)
    events: list[Event] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def _root_exec_ids(self) -> set[str]:
        return {e.id for e in self.events if isinstance(e, Exec) and e.depth == 0}

    def usage(self) -> UsageSummary:
        """The root's calls and the plain sub-calls its code made, by model (the official's handler
        counts those; a child RLM's calls are its own)."""
        execs = self._root_exec_ids()
        out: dict[str, ModelUsageSummary] = {}
        for e in self.events:
            if not isinstance(e, LMCall) or not e.counted or e.purpose not in ROOT_HANDLER:
                continue
            if e.depth != 0 and e.parent_id not in execs:
                continue
            name = self.names.get(e.model, e.model.split(":", 1)[-1])
            summary = out.setdefault(name, ModelUsageSummary(0, 0, 0, None))
            summary.total_calls += 1
            summary.total_input_tokens += e.input_tokens
            summary.total_output_tokens += e.output_tokens
            if e.cost_usd and e.cost_source == "provider":
                summary.total_cost = (summary.total_cost or 0.0) + e.cost_usd
        return UsageSummary(out)

    def replies(self) -> list[str]:
        """The root's replies, in order (its turns, then the final call's)."""
        return [
            excerpt_text(e.reply)
            for e in self.events
            if isinstance(e, LMCall) and e.depth == 0 and e.purpose in ROOT_TURNS and e.reply
        ]

    def interrupted_partial(self) -> str | None:
        """The last reply of a finished turn, as the official's `partial_answer` at an interrupt: the
        current turn's reply does not count while its code still runs."""
        replies = self.replies()
        last_call = max(
            (i for i, e in enumerate(self.events) if isinstance(e, LMCall) and e.depth == 0), default=-1
        )
        started = {
            e.exec_id for e in self.events[last_call + 1 :] if isinstance(e, ExecStart) and e.depth == 0
        }
        ended = {e.id for e in self.events[last_call + 1 :] if isinstance(e, Exec) and e.depth == 0}
        running = bool(started - ended)
        kept = replies[:-1] if running else replies
        return kept[-1] if kept else None

    def last_error(self) -> str | None:
        """The last root block's error, as the official's stderr shows it."""
        for e in reversed(self.events):
            if isinstance(e, Exec) and e.depth == 0 and e.error:
                return "\n" + error_line(e.error)
        return None

    def iterations(self, answer: str | None) -> list[RLMIteration]:
        """The root's turns; the one whose block answered carries `answer` as its `final_answer`."""
        sent: list[dict[str, Any]] = []
        turns: list[RLMIteration] = []
        blocks: dict[int, list[CodeBlock]] = {}
        calls: dict[str, list[RLMChatCompletion]] = {}
        answered: set[int] = set()
        for e in self.events:
            if isinstance(e, LMCall) and e.parent_id is not None and e.depth > 0:
                calls.setdefault(e.parent_id, []).append(self._sub_call(e))
        for start, end in self.children():  # a child RLM: one completion of its own
            if start is not None and start.parent_id is not None:
                calls.setdefault(start.parent_id, []).append(self._child_call(start, end))
        for e in self.events:
            if isinstance(e, LMCall) and e.depth == 0 and e.purpose in ROOT_TURNS:
                sent += [{"role": m.get("role", "user"), "content": excerpt_text(m)} for m in e.messages]
                reply = excerpt_text(e.reply)
                final = reply if e.purpose == "final" else None
                turns.append(RLMIteration(list(sent), reply, [], final, e.duration_s))
                blocks[len(turns)] = turns[-1].code_blocks
                sent.append({"role": "assistant", "content": reply})
            elif isinstance(e, Exec) and e.depth == 0 and turns:
                stderr = "\n" + error_line(e.error) if e.error else ""
                result = REPLResult(
                    stdout=excerpt_text(e.output),
                    stderr=stderr,
                    locals={},
                    execution_time=e.duration_s,
                    rlm_calls=calls.get(e.id or "", []),
                    final_answer=answer if e.final and len(turns) not in answered else None,
                )
                turns[-1].code_blocks.append(CodeBlock(excerpt_text(e.code), result))
                if e.final:  # the first block that answered carries the answer
                    answered.add(len(turns))
        for number in answered:
            turns[number - 1].final_answer = answer
        return turns

    def _sub_call(self, e: LMCall) -> RLMChatCompletion:
        name = self.names.get(e.model, e.model.split(":", 1)[-1])
        prompt = excerpt_text(e.messages[-1]) if e.messages else ""
        usage = ModelUsageSummary(1, e.input_tokens, e.output_tokens, e.cost_usd)
        return RLMChatCompletion(
            name, prompt, excerpt_text(e.reply), UsageSummary({name: usage}), e.duration_s
        )

    def _child_call(self, start: ChildStart, end: ChildEnd) -> RLMChatCompletion:
        """A child RLM as the official records it: its prompt, answer (or error), usage and time."""
        name = self.names.get(start.model, start.model.split(":", 1)[-1])
        turns = [e for e in self.events if isinstance(e, LMCall) and e.parent_id == start.id]
        usage = ModelUsageSummary(
            len(turns), sum(e.input_tokens for e in turns), sum(e.output_tokens for e in turns), None
        )
        answer = excerpt_text(end.answer) if end.answer is not None else ""
        return RLMChatCompletion(
            root_model=name,
            prompt=excerpt_text(start.question),
            response=answer,
            usage_summary=UsageSummary({name: usage}),
            execution_time=round(end.t - start.t, 4),
            error=end.error if end.answer is None else None,
        )

    def children(self) -> list[tuple[ChildStart | None, ChildEnd]]:
        """Each child RLM's start and end records (for the sub-call callbacks)."""
        starts = {e.id: e for e in self.events if isinstance(e, ChildStart)}
        return [(starts.get(e.child_id), e) for e in self.events if isinstance(e, ChildEnd)]
