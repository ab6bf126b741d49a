"""The trace's one vocabulary: typed events round-trip through JSON, sinks that raise are reported once
and never hide the run's own outcome, and stop reasons and exit codes are defined (and documented) once."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from rlmx import RLM, Limits
from rlmx.errors import ModelError
from rlmx.outcomes import (
    ANSWER_SOURCES,
    EXIT_INTERRUPTED,
    EXIT_LIMIT,
    EXIT_OK,
    EXIT_RUN_ERROR,
    LIMIT_REASONS,
    PURPOSES,
    STOP_REASONS,
    exit_code,
)
from rlmx.testing import FunctionLM
from rlmx.trace.events import EVENT_TYPES, Event, LMCall, RunEnd, RunStart, Unknown, from_record, usage_of

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "rlmx"


def sample(cls: type[Event]) -> Event:
    """An instance with every field set to a value of its kind that is not the default."""
    values: dict[str, Any] = {"id": "e7", "parent_id": "e1", "depth": 2, "t": 1700000000.5}
    for f in dataclasses.fields(cls):
        if f.name in values or f.name == "schema_version":
            continue
        kind = str(f.type)
        if "Purpose" in kind:
            values[f.name] = "llm_query"
        elif "StopReason" in kind:
            values[f.name] = "max_llm_calls"
        elif "AnswerSource" in kind:
            values[f.name] = "prose"
        elif kind.startswith("bool"):
            values[f.name] = not f.default
        elif kind.startswith("int"):
            values[f.name] = 3
        elif kind.startswith("float"):
            values[f.name] = 0.25
        elif kind.startswith("list"):
            values[f.name] = ["x"]
        elif "Excerpt" in kind:
            values[f.name] = {"chars": 5, "text": "hello"}
        elif kind.startswith("dict"):
            values[f.name] = {"k": 1}
        else:
            values[f.name] = f"{f.name}-value"
    return cls(**values)


@pytest.mark.parametrize("cls", list(EVENT_TYPES.values()), ids=list(EVENT_TYPES))
def test_every_record_type_round_trips_through_json(cls: type[Event]) -> None:
    event = sample(cls)
    line = json.dumps(event.to_record())
    record = json.loads(line)
    assert record["type"] == cls.TYPE and record["schema_version"] == 1
    assert list(record)[:6] == ["type", "id", "parent_id", "depth", "t", "schema_version"]
    back = from_record(record)
    assert type(back) is cls and back == event


def test_a_record_type_from_a_newer_writer_loads_as_unknown() -> None:
    record = {"type": "hologram", "id": "e9", "parent_id": "e1", "depth": 0, "t": 1.0, "name": "lookup"}
    event = from_record(record)
    assert isinstance(event, Unknown) and event.type == "hologram" and event.data["name"] == "lookup"
    assert event.to_record() == record


def test_fields_a_newer_writer_added_are_dropped_not_fatal() -> None:
    event = from_record({"type": "lm_call", "id": "e2", "model": "m", "input_tokens": 4, "future": 1})
    assert isinstance(event, LMCall) and event.input_tokens == 4 and "future" not in event.to_record()


def test_usage_of_adds_up_only_the_calls_the_ledger_booked() -> None:
    calls = [
        LMCall(id="a", depth=0, model="m1", input_tokens=10, output_tokens=2, cost_usd=0.5),
        LMCall(id="b", depth=1, model="m2", input_tokens=5, output_tokens=1, cost_usd=0.25),
        LMCall(id="c", depth=1, model="m2", input_tokens=99, output_tokens=99, counted=False),
    ]
    usage = usage_of(calls)
    assert usage["calls"] == 2 and usage["input_tokens"] == 15 and usage["cost_usd"] == 0.75
    assert usage["by_model"]["m2"]["calls"] == 1 and usage["by_depth"]["1"]["input_tokens"] == 5


def answer_at_once(messages: list[dict[str, Any]], settings: Any) -> str:
    return "FINAL(forty-two)"


def test_sinks_receive_typed_events_and_the_trace_matches_them(tmp_path: Path) -> None:
    seen: list[Event] = []
    trace = tmp_path / "run.jsonl"
    result = RLM(FunctionLM(answer_at_once), trace=trace, on_event=seen.append).run("q", "some text")
    assert result.answer == "forty-two"
    assert isinstance(seen[0], RunStart) and isinstance(seen[-1], RunEnd)
    assert seen[0].trace_path == str(trace) and seen[-1].answer_source == "final"
    written = [json.loads(line) for line in trace.read_text().splitlines()]
    assert written == [event.to_record() for event in seen]
    assert usage_of(seen) == {k: v for k, v in result.usage.items() if k != "wall_time_s"}


def test_a_sink_that_raises_is_reported_once_and_the_run_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls = []

    def broken(event: Event) -> None:
        calls.append(event)
        raise ValueError("display went away")

    with caplog.at_level(logging.WARNING, logger="rlmx"):
        result = RLM(FunctionLM(answer_at_once), trace=tmp_path / "t.jsonl", on_event=broken).run("q", "x")
    assert result.answer == "forty-two" and result.stopped_by == "final"
    assert len(calls) == 1  # dropped after its first failure
    warnings = [r for r in caplog.records if "display went away" in r.getMessage()]
    assert len(warnings) == 1 and "gets no more events" in warnings[0].getMessage()
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert records[-1]["type"] == "run_end"  # the other sinks (the trace) kept every event


def test_a_sink_that_raises_never_hides_the_runs_own_error(tmp_path: Path) -> None:
    def failing_model(messages: list[dict[str, Any]], settings: Any) -> str:
        raise ModelError("provider said no")

    def broken(event: Event) -> None:
        raise RuntimeError("sink broke")

    result = RLM(FunctionLM(failing_model), trace=False, on_event=broken).run("q", "x")
    assert result.stopped_by == "error" and result.answer is None
    assert (
        result.error is not None and "provider said no" in result.error and "sink broke" not in result.error
    )


def test_stop_reasons_purposes_and_answer_sources_are_literals_listed_once() -> None:
    assert set(LIMIT_REASONS) < set(STOP_REASONS)
    assert {"final", "error", "interrupted"} <= set(STOP_REASONS)
    assert PURPOSES == ("root", "child_root", "llm_query", "fallback", "compaction", "final", "correction")
    assert ANSWER_SOURCES == ("final", "final_var", "answer_dict", "prose", "none")
    assert Limits().max_iterations == 30  # limits no longer lists stop reasons itself
    import rlmx.limits

    assert not hasattr(rlmx.limits, "STOP_REASONS")


@pytest.mark.parametrize(
    ("stopped_by", "answered", "code"),
    [
        ("final", True, EXIT_OK),
        ("max_iterations", True, EXIT_LIMIT),
        ("timeout", False, EXIT_RUN_ERROR),
        ("error", False, EXIT_RUN_ERROR),
        ("interrupted", False, EXIT_INTERRUPTED),
    ],
)
def test_the_exit_code_table(stopped_by: Any, answered: bool, code: int) -> None:
    assert exit_code(stopped_by, answered) == code


def test_the_docs_list_every_stop_reason() -> None:
    text = (ROOT / "docs" / "errors.md").read_text()
    table = text[text.index("## Stop reasons") :]
    for reason in STOP_REASONS:
        assert f"`{reason}`" in table, reason


def test_no_string_typed_emit_or_type_comparison_is_left_in_the_source() -> None:
    """Record types are classes: outside the vocabulary no code emits by name or spells a type's name."""
    names = [name for name in EVENT_TYPES if "_" in name]  # `final`, `error`... are also stop reasons
    spelled = re.compile(r"""["'](""" + "|".join(names) + r""")["']""")
    by_name = re.compile(r"""\.emit\(\s*["']""")
    offenders = []
    for path in SRC.rglob("*.py"):
        if path == SRC / "trace" / "events.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if spelled.search(line) or by_name.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []
