"""The trace's vocabulary: one frozen dataclass per record type.

The engine builds these objects and emits them; `on_event` sinks receive them; the JSONL writer writes
`event.to_record()`; `from_record` reads a line back into the same class. Every record has `type`,
`schema_version`, `id`, `parent_id`, `depth` and `t` (Unix time); message texts are excerpts
(`{"chars": N, "text": ...}` or `{"chars": N, "head": ..., "tail": ...}`, see `excerpt`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from rlmx.errors import ConfigError
from rlmx.lm.base import Usage
from rlmx.outcomes import SUB_CALL_PURPOSES, AnswerSource, Purpose, StopReason
from rlmx.usage import UsageBook

SCHEMA_VERSION = 1  # the JSONL shape; records only gain fields within a version
EXCERPT_CHARS = 2_000

Excerpt = dict[str, Any]  # {"chars": N, "text": ...} or {"chars": N, "head": ..., "tail": ...}


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> Excerpt:
    """Size plus a capped head/tail excerpt: the trace never grows with the context. 0: the whole text."""
    if limit <= 0 or len(text) <= 2 * limit:
        return {"chars": len(text), "text": text}
    return {"chars": len(text), "head": text[:limit], "tail": text[-limit:]}


def excerpt_text(value: Any) -> str:
    """The text of an excerpt (`text`, or `head` … `tail` when it was capped); '' for None."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "text" in value:
            return str(value["text"])
        if "head" in value:
            omitted = int(value.get("chars", 0)) - len(value["head"]) - len(value.get("tail", ""))
            return f"{value['head']}\n[… {omitted:,} characters not in the trace …]\n{value.get('tail', '')}"
    return json.dumps(value, ensure_ascii=False, default=str)


@dataclass(frozen=True, kw_only=True)
class Event:
    """What every record has. `id` and `t` are stamped by the emitter when left empty."""

    TYPE: ClassVar[str] = ""
    id: str = ""
    parent_id: str | None = None
    depth: int = 0
    t: float = 0.0
    schema_version: int = SCHEMA_VERSION

    @property
    def type(self) -> str:
        return self.TYPE

    def to_record(self) -> dict[str, Any]:
        """The JSON object written to the trace (`type` first, then the common fields, then the rest)."""
        record: dict[str, Any] = {"type": self.TYPE}
        for name in _field_names(type(self)):
            record[name] = getattr(self, name)
        return record


@dataclass(frozen=True, kw_only=True)
class RunStart(Event):
    """The run began; its `id` is the root RLM's id."""

    TYPE: ClassVar[str] = "run_start"
    run_id: str = ""
    trace_path: str | None = None
    question: Excerpt | None = None
    model: str = ""
    sub_model: str = ""
    limits: dict[str, Any] = field(default_factory=dict)
    sandbox: dict[str, Any] = field(default_factory=dict)
    context_meta: str = ""
    prompt_version: int = 0
    prompt_profile: str = "rlmx"  # rlmx | official | a template file's path
    sampling: dict[str, Any] = field(default_factory=dict)  # {"root": {...}, "sub": {...}, "by_depth": {...}}
    output_schema: dict[str, Any] | None = None
    unpriced_models: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    session_id: str | None = None  # the session this run is a question of (rlmx.session); None: none
    # the run's spec as RunSpec.record() describes it: its data, attachments by name, never a secret
    spec: dict[str, Any] = field(default_factory=dict)

    @property
    def question_text(self) -> str:
        return excerpt_text(self.question)


@dataclass(frozen=True, kw_only=True)
class LMCall(Event):
    """One logical model call (its retries inside), booked against the ledger."""

    TYPE: ClassVar[str] = "lm_call"
    model: str = ""
    purpose: Purpose = "root"
    iteration: int | None = None  # the RLM's own turns
    batch_id: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    cost_source: str | None = None  # provider | price | none
    est_cost_usd: float | None = None
    max_output_tokens: int | None = None
    counted: bool = True
    cache_hit: bool = False
    duration_s: float = 0.0
    attempts: int = 1
    attempt_errors: list[str] = field(default_factory=list)
    n_messages: int = 0
    input_chars: int = 0
    messages: list[dict[str, Any]] = field(default_factory=list)  # new ones: {"role", **excerpt}
    reply: Excerpt | None = None
    error: str | None = None
    finish_reason: str | None = None  # why the model stopped, as the provider says (None: not reported)

    @property
    def is_sub_call(self) -> bool:
        return self.purpose in SUB_CALL_PURPOSES

    @property
    def message_texts(self) -> list[tuple[str, str]]:
        """(role, text) of the messages this record logged (a turn logs only the new ones)."""
        return [(str(m.get("role")), excerpt_text(m)) for m in self.messages]

    @property
    def reply_text(self) -> str:
        return excerpt_text(self.reply)

    @property
    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens, self.cached_tokens, self.reasoning_tokens)


@dataclass(frozen=True, kw_only=True)
class LMRetry(Event):
    """An attempt of a model call failed and will be retried after `delay_s`."""

    TYPE: ClassVar[str] = "lm_retry"
    model: str = ""
    purpose: Purpose = "root"
    attempt: int = 1
    error: str = ""
    delay_s: float = 0.0


@dataclass(frozen=True, kw_only=True)
class ExecStart(Event):
    """A code cell is about to run; `exec_id` is the id its `Exec` record will have."""

    TYPE: ClassVar[str] = "exec_start"
    exec_id: str = ""
    iteration: int | None = None
    code: Excerpt | None = None

    @property
    def code_text(self) -> str:
        return excerpt_text(self.code)


@dataclass(frozen=True, kw_only=True)
class Exec(Event):
    """A code cell ran; its id is the parent of the sub-calls and children it started."""

    TYPE: ClassVar[str] = "exec"
    iteration: int | None = None
    code: Excerpt | None = None
    output: Excerpt | None = None
    error: str | None = None
    final: bool = False
    restarted: bool = False
    timed_out: bool = False
    duration_s: float = 0.0
    rpc_calls: int = 0

    @property
    def code_text(self) -> str:
        return excerpt_text(self.code)

    @property
    def output_text(self) -> str:
        return excerpt_text(self.output)


@dataclass(frozen=True, kw_only=True)
class BatchStart(Event):
    """`llm_query_batched` / `rlm_query_batched` began; its id is each item's `batch_id`."""

    TYPE: ClassVar[str] = "batch_start"
    method: str = ""
    n: int = 0


@dataclass(frozen=True, kw_only=True)
class BatchEnd(Event):
    TYPE: ClassVar[str] = "batch_end"
    batch_id: str = ""
    method: str = ""
    n: int = 0
    errors: int = 0  # items that came back as error strings


@dataclass(frozen=True, kw_only=True)
class ChildStart(Event):
    """A child RLM began; its id is the child's id."""

    TYPE: ClassVar[str] = "child_start"
    question: Excerpt | None = None
    model: str = ""
    batch_id: str | None = None

    @property
    def question_text(self) -> str:
        return excerpt_text(self.question)


@dataclass(frozen=True, kw_only=True)
class ChildEnd(Event):
    TYPE: ClassVar[str] = "child_end"
    child_id: str = ""
    stopped_by: StopReason = "final"
    iterations: int = 0
    answer: Excerpt | None = None
    answer_source: AnswerSource = "none"
    error: str | None = None

    @property
    def answer_text(self) -> str | None:
        return None if self.answer is None else excerpt_text(self.answer)


@dataclass(frozen=True, kw_only=True)
class Fallback(Event):
    """An `rlm_query` at the depth limit ran as a plain call."""

    TYPE: ClassVar[str] = "fallback"
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class SandboxReady(Event):
    """The run's first REPL started: where model code runs. `layer`: namespaces | landlock | none
    (process-unisolated) | local; `worker_ids`: per-worker | shared | none; `landlock_abi`: what the
    kernel offers (0: none); `seccomp`: workers load rlmx's filter; `unavailable`: layers that could
    not be built here, and why; `notes`: what differs from the layer's full guarantees."""

    TYPE: ClassVar[str] = "sandbox_ready"
    layer: str = ""
    worker_ids: str = ""
    landlock_abi: int = 0
    seccomp: bool = False
    unavailable: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class ModelSubstituted(Event):
    """Code asked for a model this run does not have; the run's sub-model served the call instead."""

    TYPE: ClassVar[str] = "model_substituted"
    requested: str = ""
    used: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolCall(Event):
    """A call of one of the user's tools from model code (its `parent_id` is the cell's exec id). The
    arguments and the result are excerpts of their JSON. `thread_left_running`: a sync tool ran past its
    timeout; the model got the error, and its thread, which cannot be stopped, was left to finish."""

    TYPE: ClassVar[str] = "tool_call"
    name: str = ""
    duration_s: float = 0.0
    ok: bool = True
    error: str | None = None
    arguments: Excerpt | None = None
    result: Excerpt | None = None
    thread_left_running: bool = False
    server: str | None = None  # an MCP tool's server and its tool's original name (rlmx.mcp)
    mcp_tool: str | None = None


@dataclass(frozen=True, kw_only=True)
class Compaction(Event):
    TYPE: ClassVar[str] = "compaction"
    iteration: int | None = None
    condensed_upto: int = 0
    view_tokens: int = 0


@dataclass(frozen=True, kw_only=True)
class Limit(Event):
    """A limit stopped an RLM's loop; the forced final answer follows."""

    TYPE: ClassVar[str] = "limit"
    reason: StopReason = "max_iterations"
    iteration: int | None = None


@dataclass(frozen=True, kw_only=True)
class OutputRejected(Event):
    TYPE: ClassVar[str] = "output_rejected"
    iteration: int | None = None
    attempt: int = 1
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Error(Event):
    """A machinery error; `recoverable` ones did not end the RLM."""

    TYPE: ClassVar[str] = "error"
    message: str = ""
    iteration: int | None = None
    recoverable: bool = False


@dataclass(frozen=True, kw_only=True)
class Final(Event):
    """An RLM ended (the root or a child), with its answer or why there is none."""

    TYPE: ClassVar[str] = "final"
    stopped_by: StopReason = "final"
    iteration: int | None = None
    answer: Excerpt | None = None
    answer_source: AnswerSource = "none"
    error: str | None = None

    @property
    def answer_text(self) -> str | None:
        return None if self.answer is None else excerpt_text(self.answer)


@dataclass(frozen=True, kw_only=True)
class RunEnd(Event):
    """The run ended; `usage` is the whole tree's."""

    TYPE: ClassVar[str] = "run_end"
    stopped_by: StopReason = "final"
    iterations: int = 0
    answer: Excerpt | None = None
    answer_source: AnswerSource = "none"
    error: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def answer_text(self) -> str | None:
        return None if self.answer is None else excerpt_text(self.answer)


@dataclass(frozen=True, kw_only=True)
class Unknown(Event):
    """A record of a type this version does not know (a newer writer): kept whole in `data`."""

    record_type: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def type(self) -> str:
        return self.record_type

    def to_record(self) -> dict[str, Any]:
        return dict(self.data)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.TYPE: cls
    for cls in (
        RunStart,
        LMCall,
        LMRetry,
        ExecStart,
        Exec,
        BatchStart,
        BatchEnd,
        ChildStart,
        ChildEnd,
        Fallback,
        SandboxReady,
        ModelSubstituted,
        ToolCall,
        Compaction,
        Limit,
        OutputRejected,
        Error,
        Final,
        RunEnd,
    )
}
_NAMES: dict[type[Event], tuple[str, ...]] = {}


def _field_names(cls: type[Event]) -> tuple[str, ...]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def from_record(record: dict[str, Any]) -> Event:
    """The event a JSON record describes. Fields this version does not know are dropped; a type it does
    not know becomes `Unknown` with the whole record. A record that cannot be read (a `depth` that is not
    a number, an unexpected argument) raises `ConfigError` naming it."""
    try:
        return _from_record(record)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"not a readable rlmx trace record ({exc}): {str(record)[:200]}") from exc


def _from_record(record: dict[str, Any]) -> Event:
    cls = EVENT_TYPES.get(str(record.get("type")))
    if cls is None:
        return Unknown(
            record_type=str(record.get("type")),
            id=str(record.get("id", "")),
            parent_id=record.get("parent_id"),
            depth=int(record.get("depth", 0)),
            t=float(record.get("t", 0.0)),
            schema_version=int(record.get("schema_version", SCHEMA_VERSION)),
            data=dict(record),
        )
    known = _field_names(cls)
    values = {name: record[name] for name in known if name in record}
    values["id"] = str(values.get("id", ""))
    return cls(**values)


def usage_of(events: Iterable[Event]) -> dict[str, Any]:
    """The run's usage added up from its `lm_call` records, as the ledger adds it (`run_end.usage`
    without wall time): only calls booked against the ledger count."""
    book = UsageBook()
    for event in events:
        if isinstance(event, LMCall) and event.counted:
            book.add(event.model, event.depth, event.usage, event.cost_usd)
    return book.to_dict()
