"""Typed trace records: one class per record type that analyses use, `Event` for the rest."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from rlmx.engine.events import SCHEMA_VERSION
from rlmx.lm.base import Usage


def excerpt_text(value: Any) -> str:
    """The text of an excerpt dict (`text`, or `head` … `tail` when it was capped); '' for None."""
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


@dataclass
class Event:
    """One trace record. `data` is the whole record; typed subclasses expose the common fields."""

    type: str
    id: str
    parent_id: str | None
    depth: int
    t: float
    schema_version: int
    data: dict[str, Any] = field(repr=False)

    TYPE: ClassVar[str] = ""

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    @property
    def iteration(self) -> int | None:
        value = self.data.get("iteration")
        return int(value) if isinstance(value, int) else None


@dataclass
class LMCall(Event):
    TYPE: ClassVar[str] = "lm_call"
    model: str = ""
    purpose: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    duration_s: float = 0.0
    counted: bool = True
    batch_id: str | None = None
    error: str | None = None

    @property
    def messages(self) -> list[tuple[str, str]]:
        """(role, text) of the messages this record logged (a turn logs only the new ones)."""
        return [(str(m.get("role")), excerpt_text(m)) for m in self.data.get("messages") or []]

    @property
    def reply(self) -> str:
        return excerpt_text(self.data.get("reply"))

    @property
    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens, self.cached_tokens, self.reasoning_tokens)


@dataclass
class Exec(Event):
    TYPE: ClassVar[str] = "exec"
    duration_s: float = 0.0
    error: str | None = None
    final: bool = False
    timed_out: bool = False

    @property
    def code(self) -> str:
        return excerpt_text(self.data.get("code"))

    @property
    def output(self) -> str:
        return excerpt_text(self.data.get("output"))


@dataclass
class ChildStart(Event):
    TYPE: ClassVar[str] = "child_start"
    model: str = ""
    batch_id: str | None = None

    @property
    def question(self) -> str:
        return excerpt_text(self.data.get("question"))


@dataclass
class ChildEnd(Event):
    TYPE: ClassVar[str] = "child_end"
    child_id: str = ""
    stopped_by: str = ""
    iterations: int = 0
    error: str | None = None

    @property
    def answer(self) -> str | None:
        return None if self.data.get("answer") is None else excerpt_text(self.data["answer"])


@dataclass
class RunStart(Event):
    TYPE: ClassVar[str] = "run_start"
    run_id: str = ""
    model: str = ""
    sub_model: str = ""

    @property
    def question(self) -> str:
        return excerpt_text(self.data.get("question"))


@dataclass
class RunEnd(Event):
    TYPE: ClassVar[str] = "run_end"
    stopped_by: str = ""
    iterations: int = 0
    error: str | None = None
    elapsed_s: float = 0.0
    answer_source: str = "none"  # final | final_var | prose | none (traces before it: "none")

    @property
    def answer(self) -> str | None:
        return None if self.data.get("answer") is None else excerpt_text(self.data["answer"])


@dataclass
class Final(Event):
    TYPE: ClassVar[str] = "final"
    stopped_by: str = ""
    error: str | None = None
    answer_source: str = "none"


EVENT_TYPES: dict[str, type[Event]] = {
    cls.TYPE: cls for cls in (LMCall, Exec, ChildStart, ChildEnd, RunStart, RunEnd, Final)
}
BASE_FIELDS = ("type", "id", "parent_id", "depth", "t", "schema_version")


def event_from_record(record: dict[str, Any]) -> Event:
    cls = EVENT_TYPES.get(str(record.get("type")), Event)
    extra = {f.name: record[f.name] for f in fields(cls) if f.name not in BASE_FIELDS and f.name in record}
    extra.pop("data", None)
    return cls(
        type=str(record["type"]),
        id=str(record.get("id", "")),
        parent_id=record.get("parent_id"),
        depth=int(record.get("depth", 0)),
        t=float(record.get("t", 0.0)),
        schema_version=int(record.get("schema_version", SCHEMA_VERSION)),
        data=record,
        **extra,
    )
