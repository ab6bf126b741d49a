"""`SpanSink`: a run's events as OpenTelemetry spans, through the OpenTelemetry API only.

The spans mirror the rlmx trace tree: the run (`invoke_agent rlmx`) holds its root turns (`rlmx turn`),
a turn its model call (`chat MODEL`) and its code cells (`rlmx cell`), a cell its sub-calls (`chat
MODEL`), child RLMs (`invoke_agent rlmx.child`, with turns of their own) and tool calls (`execute_tool
NAME`). Records that arrive when their work has ended (model and tool calls) become spans with the start
time they report. Prompt, reply, code and tool text only with `capture_content`; the context never.
"""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from rlmx.telemetry import attributes as a
from rlmx.trace.events import (
    ChildEnd,
    ChildStart,
    Compaction,
    Error,
    Event,
    Exec,
    ExecStart,
    Fallback,
    Final,
    Limit,
    LMCall,
    ModelSubstituted,
    OutputRejected,
    RunEnd,
    RunStart,
    SandboxReady,
    ToolCall,
    excerpt_text,
)

TRACER_NAME = "rlmx"
TEXT_LIMIT = 8_000  # characters of one captured text attribute


def ns(t: float) -> int:
    return int(t * 1e9)


class SpanSink:
    """An `on_event` sink making spans. `parent`: the OpenTelemetry context the run span starts in
    (None: the caller's current one, taken now); `capture_content`: prompt and reply text on spans."""

    def __init__(self, *, parent: Any = None, capture_content: bool = False, tracer: Any = None) -> None:
        self.parent = parent if parent is not None else otel_context.get_current()
        self.capture = capture_content
        self.tracer = tracer or trace.get_tracer(TRACER_NAME, a.rlmx_version(), schema_url=a.SCHEMA_URL)
        self.run_id = ""
        self._lock = threading.Lock()
        self._nodes: dict[str, Span] = {}  # the run's and the children's spans, by RLM id
        self._cells: dict[str, Span] = {}  # by exec id
        self._turns: dict[str, tuple[int, Span]] = {}  # each RLM's open turn
        self._depths: dict[str, int] = {}
        self.run_span: Span | None = None

    def __repr__(self) -> str:
        return "SpanSink()"

    def __call__(self, event: Event) -> None:
        handler = self._HANDLERS.get(type(event))
        if handler is not None:
            with self._lock:
                handler(self, event)

    # --- the spans ---------------------------------------------------------------------------------------

    def _start(self, name: str, parent: Span | None, start: float, attrs: dict[str, Any], **kw: Any) -> Span:
        ctx = trace.set_span_in_context(parent) if parent is not None else self.parent
        return self.tracer.start_span(
            name, context=ctx, start_time=ns(start), attributes=a.clean(attrs), **kw
        )

    def _text(self, span: Span, key: str, text: str | None) -> None:
        if self.capture and text:
            span.set_attribute(key, text[:TEXT_LIMIT])

    def _node_of(self, event: Event) -> Span | None:
        return self._nodes.get(str(event.parent_id)) or self.run_span

    def _turn(self, node_id: str, iteration: int, start: float) -> Span | None:
        """The RLM's span of turn `iteration`, opened (and the one before it ended) when it is new."""
        node = self._nodes.get(node_id)
        if node is None:
            return None
        current = self._turns.get(node_id)
        if current is not None and current[0] == iteration:
            return current[1]
        if current is not None:
            current[1].end(end_time=ns(start))
        attrs = {"rlmx.iteration": iteration, "rlmx.depth": self._depths.get(node_id, 0)}
        span = self._start("rlmx turn", node, start, attrs)
        self._turns[node_id] = (iteration, span)
        return span

    def _end_turn(self, node_id: str, t: float) -> None:
        current = self._turns.pop(node_id, None)
        if current is not None:
            current[1].end(end_time=ns(t))

    def _parent_of_call(self, event: LMCall | ToolCall | ExecStart | Exec) -> Span | None:
        """A cell's for its sub-calls and tool calls, a turn's for an RLM's own calls and cells."""
        parent = str(event.parent_id)
        if parent in self._cells:
            return self._cells[parent]
        iteration = getattr(event, "iteration", None)
        start = event.t - getattr(event, "duration_s", 0.0)
        if parent in self._nodes and iteration is not None:
            return self._turn(parent, iteration, start)
        return self._node_of(event)

    # --- the handlers ------------------------------------------------------------------------------------

    def _run_start(self, e: RunStart) -> None:
        self.run_id = e.run_id
        attrs = {
            a.OPERATION: "invoke_agent",
            a.AGENT_NAME: "rlmx",
            a.AGENT_ID: f"{e.run_id}/{e.id}",
            a.CONVERSATION_ID: e.session_id,
            **a.model_attributes(e.model),
            "rlmx.run_id": e.run_id,
            "rlmx.depth": 0,
            "rlmx.trace_id": e.run_id,
            "rlmx.trace_path": e.trace_path,
            "rlmx.sub_model": e.sub_model,
            "rlmx.prompt_profile": e.prompt_profile,
        }
        span = self._start("invoke_agent rlmx", None, e.t, attrs)
        self._text(span, "rlmx.question", e.question_text)
        self.run_span = self._nodes[e.id] = span

    def _run_end(self, e: RunEnd) -> None:
        span = self.run_span
        if span is None:
            return
        for node_id in list(self._turns):
            self._end_turn(node_id, e.t)
        for cell in self._cells.values():  # a run that stopped inside a cell
            cell.end(end_time=ns(e.t))
        self._cells.clear()
        for node in list(self._nodes.values()):
            if node is not span:
                node.end(end_time=ns(e.t))
        usage = e.usage or {}
        span.set_attributes(
            a.clean(
                {
                    "rlmx.stop_reason": e.stopped_by,
                    "rlmx.iterations": e.iterations,
                    "rlmx.answer_source": e.answer_source,
                    "rlmx.cost_usd": usage.get("cost_usd"),
                    "rlmx.usage.calls": usage.get("calls"),
                    "rlmx.usage.input_tokens": usage.get("input_tokens"),
                    "rlmx.usage.output_tokens": usage.get("output_tokens"),
                    "rlmx.usage.cached_tokens": usage.get("cached_tokens"),
                    "rlmx.elapsed_s": e.elapsed_s,
                }
            )
        )
        self._text(span, "rlmx.answer", e.answer_text)
        if e.error or e.stopped_by == "error":
            span.set_status(Status(StatusCode.ERROR, (e.error or "error")[:300]))
            span.set_attribute(a.ERROR_TYPE, e.stopped_by)
        span.end(end_time=ns(e.t))
        self._nodes.clear()
        self.run_span = None

    def end_open_spans(self) -> None:
        """End what is still open when the run closes without its run_end record (an unexpected
        failure): the run span with status ERROR, so nothing is left unexported."""
        with self._lock:
            if self.run_span is None:
                return
            self._run_end(
                RunEnd(stopped_by="error", error="the run ended without a run_end record", t=time.time())
            )

    def _lm_call(self, e: LMCall) -> None:
        parent = self._parent_of_call(e)
        attrs = {
            a.OPERATION: "chat",
            **a.model_attributes(e.model),
            a.REQUEST_MAX_TOKENS: e.max_output_tokens,
            a.INPUT_TOKENS: e.input_tokens if e.counted else None,
            a.OUTPUT_TOKENS: e.output_tokens if e.counted else None,
            "rlmx.purpose": e.purpose,
            "rlmx.depth": e.depth,
            "rlmx.iteration": e.iteration,
            "rlmx.batch_id": e.batch_id,
            "rlmx.cost_usd": e.cost_usd,
            "rlmx.record_id": e.id,
            # the usual values left out (a span's attributes are most of its cost)
            "rlmx.cached_tokens": e.cached_tokens or None,
            "rlmx.reasoning_tokens": e.reasoning_tokens or None,
            "rlmx.counted": None if e.counted else False,
            "rlmx.cache_hit": e.cache_hit or None,
            "rlmx.attempts": e.attempts if e.attempts != 1 else None,
        }
        finish = e.finish_reason
        if finish:
            attrs[a.FINISH_REASONS] = [finish]
        _, model = a.split_model(e.model)
        span = self._start(f"chat {model}", parent, e.t - e.duration_s, attrs, kind=SpanKind.CLIENT)
        for n, error in enumerate(e.attempt_errors, 1):
            span.add_event("rlmx.retry", {"rlmx.attempt": n, "rlmx.error": error[:300]})
        if self.capture:
            span.set_attribute(a.INPUT_MESSAGES, a.messages_json(e.message_texts)[: TEXT_LIMIT * 4])
            if e.reply is not None:
                span.set_attribute(a.OUTPUT_MESSAGES, a.reply_json(e.reply_text, finish)[:TEXT_LIMIT])
        if e.error:
            span.set_status(Status(StatusCode.ERROR, e.error[:300]))
            span.set_attribute(a.ERROR_TYPE, "model_error")
        span.end(end_time=ns(e.t))

    def _exec_start(self, e: ExecStart) -> None:
        parent = self._parent_of_call(e)
        attrs = {"rlmx.depth": e.depth, "rlmx.iteration": e.iteration, "rlmx.record_id": e.exec_id}
        span = self._start("rlmx cell", parent, e.t, attrs)
        self._text(span, "rlmx.code", e.code_text)
        self._cells[e.exec_id] = span

    def _exec(self, e: Exec) -> None:
        span = self._cells.pop(e.id, None)
        if span is None:  # no exec_start came: a span with the duration it reports
            span = self._start("rlmx cell", self._parent_of_call(e), e.t - e.duration_s, {})
            self._text(span, "rlmx.code", e.code_text)
        flags = {
            "rlmx.cell.final": e.final,
            "rlmx.cell.timed_out": e.timed_out,
            "rlmx.cell.restarted": e.restarted,
        }
        span.set_attributes(
            {
                "rlmx.cell.raised": e.error is not None,
                "rlmx.cell.rpc_calls": e.rpc_calls,
                **{k: True for k, v in flags.items() if v},  # set only when true
            }
        )
        self._text(span, "rlmx.cell.output", e.output_text)  # what the code printed: opt-in only
        self._text(span, "rlmx.cell.error", e.error)
        span.end(end_time=ns(e.t))

    def _child_start(self, e: ChildStart) -> None:
        parent = self._cells.get(str(e.parent_id)) or self._node_of(e)
        attrs = {
            a.OPERATION: "invoke_agent",
            a.AGENT_NAME: "rlmx.child",
            a.AGENT_ID: f"{self.run_id}/{e.id}",
            **a.model_attributes(e.model),
            "rlmx.depth": e.depth,
            "rlmx.batch_id": e.batch_id,
            "rlmx.record_id": e.id,
        }
        span = self._start("invoke_agent rlmx.child", parent, e.t, attrs)
        self._text(span, "rlmx.question", e.question_text)
        self._nodes[e.id] = span
        self._depths[e.id] = e.depth

    def _child_end(self, e: ChildEnd) -> None:
        self._end_turn(e.child_id, e.t)
        self._depths.pop(e.child_id, None)
        span = self._nodes.pop(e.child_id, None)
        if span is None:
            return
        span.set_attributes({"rlmx.stop_reason": e.stopped_by, "rlmx.iterations": e.iterations})
        self._text(span, "rlmx.answer", e.answer_text)
        if e.error or e.stopped_by == "error":
            span.set_status(Status(StatusCode.ERROR, (e.error or "error")[:300]))
            span.set_attribute(a.ERROR_TYPE, e.stopped_by)
        span.end(end_time=ns(e.t))

    def _tool_call(self, e: ToolCall) -> None:
        parent = self._parent_of_call(e)
        attrs = {
            a.OPERATION: "execute_tool",
            a.TOOL_NAME: e.name,
            a.TOOL_TYPE: "function",
            "rlmx.depth": e.depth,
            "rlmx.tool.ok": e.ok,
            "rlmx.tool.thread_left_running": e.thread_left_running,
            "rlmx.record_id": e.id,
        }
        if e.server:  # an MCP call: its server and the tool's own name (the function's is TOOL_NAME)
            attrs["rlmx.mcp.server"] = e.server
            attrs["rlmx.mcp.tool"] = e.mcp_tool or e.name
        span = self._start(f"execute_tool {e.name}", parent, e.t - e.duration_s, attrs)
        self._text(span, a.TOOL_ARGUMENTS, excerpt_text(e.arguments) if e.arguments else None)
        self._text(span, a.TOOL_RESULT, excerpt_text(e.result) if e.result else None)
        if not e.ok:
            span.set_status(
                Status(StatusCode.ERROR, "the tool failed" if not self.capture else (e.error or "")[:300])
            )
            span.set_attribute(a.ERROR_TYPE, "tool_error")
        span.end(end_time=ns(e.t))

    def _final(self, e: Final) -> None:
        self._end_turn(str(e.parent_id), e.t)
        node = self._nodes.get(str(e.parent_id))
        if node is not None:
            node.set_attribute("rlmx.stop_reason", e.stopped_by)

    def _marker(self, e: Event) -> None:
        """Records that mark a moment: an event on the cell or RLM span they belong to."""
        span = self._cells.get(str(e.parent_id)) or self._node_of(e)
        if span is None:
            return
        attrs: dict[str, Any] = {"rlmx.depth": e.depth}
        if isinstance(e, Limit):
            attrs["rlmx.stop_reason"] = e.reason
        elif isinstance(e, Error):
            attrs["rlmx.recoverable"] = e.recoverable
            if self.capture:
                attrs["rlmx.message"] = e.message[:300]
        elif isinstance(e, ModelSubstituted):
            attrs.update({"rlmx.requested": e.requested, "rlmx.used": e.used})
        elif isinstance(e, Compaction):
            attrs["rlmx.view_tokens"] = e.view_tokens
        elif isinstance(e, SandboxReady):
            attrs["rlmx.sandbox.layer"] = e.layer
            span.set_attribute("rlmx.sandbox.layer", e.layer)
        span.add_event(f"rlmx.{e.type}", a.clean(attrs), timestamp=ns(e.t))

    _HANDLERS: ClassVar[dict[type[Event], Any]] = {
        RunStart: _run_start,
        RunEnd: _run_end,
        LMCall: _lm_call,
        ExecStart: _exec_start,
        Exec: _exec,
        ChildStart: _child_start,
        ChildEnd: _child_end,
        ToolCall: _tool_call,
        Final: _final,
        Limit: _marker,
        Error: _marker,
        Fallback: _marker,
        ModelSubstituted: _marker,
        Compaction: _marker,
        OutputRejected: _marker,
        SandboxReady: _marker,
    }
