"""`rlmx.trace.load`: typed events, the call tree of a depth-2 run, and usage recomputed from the trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import rlmx.trace
from observability_runs import depth2_policy, run_depth2
from policies import is_rlm, repl, turn
from rlmx import RLM, ConfigError, Limits, ModelOptions
from rlmx.testing import ScriptedServer
from rlmx.trace import EVENT_TYPES, Cell, Exec, Fallback, LMCall, RunStart


@pytest.fixture(scope="module")
def depth2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path, list[Any]]:
    path = tmp_path_factory.mktemp("trace") / "run.jsonl"
    with ScriptedServer(depth2_policy) as srv:
        result = run_depth2(srv, path)
        requests = srv.requests
    assert result.stopped_by == "final", result.error
    return result, path, requests


def raw(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_usage_equals_the_sum_of_every_lm_call_record(depth2: tuple[Any, Path, list[Any]]) -> None:
    result, path, requests = depth2
    calls = [r for r in raw(path) if r["type"] == "lm_call" and r["counted"]]
    assert result.usage["calls"] == len(calls) == len(requests)
    for key in ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens"):
        assert result.usage[key] == sum(r[key] for r in calls), key
    assert result.usage["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in calls), abs=1e-8)
    for depth in (0, 1, 2):
        at_depth = [r for r in calls if r["depth"] == depth]
        assert at_depth, f"no calls at depth {depth}"
        assert result.usage["by_depth"][str(depth)]["calls"] == len(at_depth)
        assert result.usage["by_depth"][str(depth)]["input_tokens"] == sum(
            r["input_tokens"] for r in at_depth
        )
    assert result.usage["wall_time_s"] > 0
    # and the loader's own recomputation says the same
    recomputed = rlmx.trace.load(path).usage()
    assert recomputed == {k: v for k, v in result.usage.items() if k != "wall_time_s"}


def test_the_tree_has_turns_cells_batches_and_children(depth2: tuple[Any, Path, list[Any]]) -> None:
    _, path, _ = depth2
    trace = rlmx.trace.load(path)
    root = trace.root
    assert [t.iteration for t in root.turns] == [1, 2]
    first = root.turns[0]
    assert [c.purpose for c in first.calls] == ["root"]
    (cell,) = first.cells
    assert isinstance(cell, Cell) and "rlm_query_batched" in cell.code and cell.exec is not None
    assert [b.method for b in cell.batches] == ["llm_query_batched", "rlm_query_batched"]
    assert [b.n for b in cell.batches] == [3, 2]
    assert len(cell.sub_calls) == 3 and all(c.purpose == "llm_query" for c in cell.sub_calls)
    assert sorted(child.question for child in cell.children) == ["child A", "child B"]
    for child in cell.children:
        assert child.depth == 1 and child.stopped_by == "final"
        assert [t.iteration for t in child.turns] == [1, 2]
        (child_cell,) = child.turns[0].cells
        purposes = sorted(c.purpose for c in child_cell.sub_calls)
        assert purposes == ["fallback", "llm_query", "llm_query"]  # rlm_query at max depth falls back
        assert all(c.depth == 2 for c in child_cell.sub_calls)
        assert any(isinstance(e, Fallback) for e in child_cell.events)
    assert [n.depth for n in trace.nodes()] == [0, 1, 1]
    # every model call of the run is somewhere in the tree, exactly once
    assert sorted(c.id for c in root.lm_calls()) == sorted(c.id for c in trace.lm_calls())


def test_events_are_typed_and_every_parent_exists(depth2: tuple[Any, Path, list[Any]]) -> None:
    _, path, _ = depth2
    trace = rlmx.trace.load(path)
    assert isinstance(trace.events[0], RunStart) and trace.run_end is not None
    # every record of the file is read into the class of its type, in file order
    records = raw(path)
    assert len(trace.events) == len(records)
    assert all(isinstance(e, EVENT_TYPES[r["type"]]) for e, r in zip(trace.events, records, strict=True))
    assert len(trace.of_type(LMCall)) == sum(r["type"] == "lm_call" for r in records) > 0
    ids = [e.id for e in trace.events]
    assert len(ids) == len(set(ids))
    assert all(e.parent_id is None or e.parent_id in trace.by_id for e in trace.events)
    call = trace.lm_calls()[0]
    assert call.model == "openai:scripted" and call.message_texts[0][0] == "system" and call.reply_text
    summary = trace.summary()
    assert summary["stopped_by"] == "final" and summary["finished"] and summary["iterations"] == 2


def test_a_file_with_two_runs_loads_each(tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"

    def policy(messages: list[dict[str, Any]], request: Any = None) -> str:
        return "FINAL(one)" if "first" in messages[1]["content"] else "FINAL(two)"

    with ScriptedServer(policy) as srv:
        rlm = RLM("openai:scripted", model_options=ModelOptions(base_url=srv.url), trace=path)
        rlm.run("first question", "ctx")
        rlm.run("second question", "ctx")
    runs = rlmx.trace.load_all(path)
    assert [r.summary()["answer"] for r in runs] == ["one", "two"]
    assert rlmx.trace.load(path).root.question == "second question"
    assert rlmx.trace.load(path, run=0).root.question == "first question"
    with pytest.raises(ConfigError, match="holds 2 run"):
        rlmx.trace.load(path, run=5)


def test_a_torn_last_line_is_dropped_and_a_bad_line_is_reported(
    depth2: tuple[Any, Path, list[Any]], tmp_path: Path
) -> None:
    _, path, _ = depth2
    lines = path.read_text().splitlines()
    torn = tmp_path / "torn.jsonl"
    torn.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:25])  # the writer died mid-record
    trace = rlmx.trace.load(torn)
    assert trace.run_end is None and not trace.summary()["finished"]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([lines[0], "{not json", *lines[1:]]))
    with pytest.raises(ConfigError, match=r"broken.jsonl:2: not a JSON trace record"):
        rlmx.trace.load(broken)
    unreadable = tmp_path / "unreadable.jsonl"
    unreadable.write_text(
        "\n".join([lines[0], '{"type": "from_a_later_version", "depth": "deep"}', *lines[1:]])
    )
    with pytest.raises(ConfigError, match=r"^not a readable rlmx trace record \(.*'deep'"):
        rlmx.trace.load(unreadable)  # a record whose depth is not a number


def test_trace_full_keeps_whole_texts_and_the_default_caps_them(tmp_path: Path) -> None:
    long_prompt = "x" * 3_000 + "MIDDLE" + "y" * 3_000

    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if not is_rlm(request):
            return "z" * 5_000
        return repl(f"r = llm_query({long_prompt!r})") if turn(messages) == 0 else "FINAL(done)"

    texts = {}
    for name, chars in (("capped", 2_000), ("full", 0)):
        path = tmp_path / f"{name}.jsonl"
        with ScriptedServer(policy) as srv:
            RLM(
                "openai:scripted",
                model_options=ModelOptions(base_url=srv.url),
                trace=path,
                excerpt_chars=chars,
                limits=Limits(max_depth=1),
            ).run("q", "ctx")
        (sub,) = [c for c in rlmx.trace.load(path).lm_calls() if c.purpose == "llm_query"]
        assert sub.reply is not None
        texts[name] = (sub.messages[0], sub.reply)
    prompt, reply = texts["full"]
    assert prompt == {"role": "user", "chars": len(long_prompt), "text": long_prompt}
    assert reply["text"] == "z" * 5_000
    prompt, reply = texts["capped"]
    assert "MIDDLE" not in json.dumps(prompt) and prompt["chars"] == len(long_prompt)
    assert len(prompt["head"]) == len(prompt["tail"]) == 2_000 and len(reply["head"]) == 2_000


# --- a trace written before the engine emitted typed events ------------------------------------------------
# A small run as the previous writer (`emit("lm_call", **fields)`) put it on disk, schema_version 1, field for
# field, with one record type this version does not know (`something_new`) and one field it does not know.
OLD_TRACE = """\
{"type": "run_start", "schema_version": 1, "id": "e1", "parent_id": null, "depth": 0, "t": 100.0, "run_id": "0ldrun", "trace_path": null, "question": {"chars": 17, "text": "How many tickets?"}, "unpriced_models": [], "warnings": [], "model": "openai:old", "sub_model": "openai:old-mini", "limits": {"max_depth": 1}, "sandbox": {"backend": "process"}, "context_meta": "str, 9 chars", "prompt_version": 3, "output_schema": null}
{"type": "lm_call", "schema_version": 1, "id": "e2", "parent_id": "e1", "depth": 0, "t": 101.0, "model": "openai:old", "purpose": "root", "input_tokens": 150, "output_tokens": 20, "cached_tokens": 0, "reasoning_tokens": 0, "cost_usd": 0.0015, "cost_source": "price", "est_cost_usd": 0.003, "max_output_tokens": 4096, "counted": true, "cache_hit": false, "duration_s": 0.25, "attempts": 1, "attempt_errors": [], "n_messages": 2, "input_chars": 600, "messages": [{"role": "system", "chars": 7, "text": "You are"}, {"role": "user", "chars": 17, "text": "How many tickets?"}], "reply": {"chars": 34, "text": "```repl\\nn = llm_query('count')\\n```"}, "error": null, "iteration": 1}
{"type": "exec_start", "schema_version": 1, "id": "e4", "parent_id": "e1", "depth": 0, "t": 101.1, "exec_id": "e3", "iteration": 1, "code": {"chars": 22, "text": "n = llm_query('count')"}}
{"type": "lm_call", "schema_version": 1, "id": "e5", "parent_id": "e3", "depth": 1, "t": 101.5, "model": "openai:old-mini", "purpose": "llm_query", "input_tokens": 30, "output_tokens": 5, "cached_tokens": 0, "reasoning_tokens": 0, "cost_usd": 0.0001, "cost_source": "price", "est_cost_usd": 0.0002, "max_output_tokens": 4096, "counted": true, "cache_hit": false, "duration_s": 0.2, "attempts": 1, "attempt_errors": [], "n_messages": 1, "input_chars": 5, "messages": [{"role": "user", "chars": 5, "text": "count"}], "reply": {"chars": 2, "text": "42"}, "error": null, "batch_id": null}
{"type": "exec", "schema_version": 1, "id": "e3", "parent_id": "e1", "depth": 0, "t": 101.6, "iteration": 1, "code": {"chars": 22, "text": "n = llm_query('count')"}, "output": {"chars": 0, "text": ""}, "error": null, "final": false, "restarted": false, "timed_out": false, "duration_s": 0.5, "rpc_calls": 1}
{"type": "something_new", "schema_version": 1, "id": "e6", "parent_id": "e1", "depth": 0, "t": 101.7, "detail": "from a newer writer"}
{"type": "lm_call", "schema_version": 1, "id": "e7", "parent_id": "e1", "depth": 0, "t": 102.0, "model": "openai:old", "purpose": "root", "input_tokens": 150, "output_tokens": 20, "cached_tokens": 0, "reasoning_tokens": 0, "cost_usd": 0.0015, "cost_source": "price", "est_cost_usd": 0.003, "max_output_tokens": 4096, "counted": true, "cache_hit": false, "duration_s": 0.25, "attempts": 1, "attempt_errors": [], "n_messages": 1, "input_chars": 30, "messages": [{"role": "user", "chars": 2, "text": "42"}], "reply": {"chars": 9, "text": "FINAL(42)"}, "error": null, "iteration": 2, "added_later": "not a field this version knows"}
{"type": "final", "schema_version": 1, "id": "e8", "parent_id": "e1", "depth": 0, "t": 102.1, "stopped_by": "final", "iteration": 2, "answer": {"chars": 2, "text": "42"}, "answer_source": "final", "error": null}
{"type": "run_end", "schema_version": 1, "id": "e9", "parent_id": "e1", "depth": 0, "t": 102.2, "stopped_by": "final", "iterations": 2, "answer": {"chars": 2, "text": "42"}, "answer_source": "final", "error": null, "usage": {"calls": 3, "input_tokens": 330, "output_tokens": 45, "cached_tokens": 0, "reasoning_tokens": 0, "cost_usd": 0.0031, "by_model": {"openai:old": {"calls": 2, "input_tokens": 300, "output_tokens": 40, "cached_tokens": 0, "reasoning_tokens": 0, "cost_usd": 0.003}, "openai:old-mini": {"calls": 1, "input_tokens": 30, "output_tokens": 5, "cached_tokens": 0, "reasoning_tokens": 0, "cost_usd": 0.0001}}, "by_depth": {"0": {"calls": 2, "input_tokens": 300, "output_tokens": 40, "cached_tokens": 0, "reasoning_tokens": 0, "cost_usd": 0.003}, "1": {"calls": 1, "input_tokens": 30, "output_tokens": 5, "cached_tokens": 0, "reasoning_tokens": 0, "cost_usd": 0.0001}}}, "elapsed_s": 2.2}
"""


def test_a_trace_of_the_previous_version_loads_into_the_typed_classes(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_text(OLD_TRACE)
    trace = rlmx.trace.load(path)
    kinds = [type(e).__name__ for e in trace.events]
    assert kinds == [
        "RunStart",
        "LMCall",
        "ExecStart",
        "LMCall",
        "Exec",
        "Unknown",
        "LMCall",
        "Final",
        "RunEnd",
    ]
    # a type this version does not know is kept whole, and fails nothing
    (unknown,) = trace.of_type(rlmx.trace.Unknown)
    assert unknown.record_type == "something_new" and unknown.data["detail"] == "from a newer writer"
    assert unknown.to_record() == json.loads(OLD_TRACE.splitlines()[5]) and unknown in trace.root.events
    # typed fields, text accessors and the tree
    start = trace.run_start
    assert (
        start.run_id == "0ldrun" and start.question_text == "How many tickets?" and start.prompt_version == 3
    )
    assert start.limits == {"max_depth": 1} and start.output_schema is None
    assert [t.iteration for t in trace.root.turns] == [1, 2]
    first_call = trace.root.turns[0].calls[0]
    assert first_call.message_texts == [("system", "You are"), ("user", "How many tickets?")]
    assert "llm_query('count')" in first_call.reply_text
    (cell,) = trace.root.turns[0].cells
    assert cell.code == "n = llm_query('count')" and isinstance(cell.exec, Exec) and cell.exec.rpc_calls == 1
    assert cell.start is not None and cell.start.exec_id == "e3"
    (sub,) = cell.sub_calls
    assert sub.purpose == "llm_query" and sub.reply_text == "42" and sub.message_texts == [("user", "count")]
    assert sub.depth == 1 and sub.cost_source == "price" and sub.attempts == 1
    assert trace.root.stopped_by == "final" and trace.root.final is not None
    assert trace.root.final.answer_source == "final" and trace.root.final.answer_text == "42"
    # usage recomputed from the records equals what the old writer put in run_end
    assert trace.run_end is not None and trace.usage() == trace.run_end.usage
    assert trace.summary() == {
        "question": "How many tickets?",
        "answer": "42",
        "stopped_by": "final",
        "iterations": 2,
        "calls": 3,
        "input_tokens": 330,
        "output_tokens": 45,
        "cached_tokens": 0,
        "cost_usd": 0.0031,
        "elapsed_s": 2.2,
        "finished": True,
    }


def test_records_from_before_later_fields_get_their_defaults() -> None:
    """Records only gain fields within schema_version 1: a record without the newer ones still reads."""
    end = rlmx.trace.from_record(
        json.loads(
            '{"type": "run_end", "schema_version": 1, "id": "e9", "parent_id": "e1", "depth": 0, "t": 1.0, '
            '"stopped_by": "max_iterations", "iterations": 3, "answer": null, "error": null, "usage": {}, '
            '"elapsed_s": 1.0}'
        )
    )
    assert isinstance(end, rlmx.trace.RunEnd)
    assert end.answer_source == "none" and end.answer_text is None and end.stopped_by == "max_iterations"
    call = rlmx.trace.from_record(
        json.loads(
            '{"type": "lm_call", "schema_version": 1, "id": "e2", "parent_id": "e1", "depth": 0, "t": 1.0, '
            '"model": "m", "purpose": "root", "input_tokens": 5, "output_tokens": 1, "cost_usd": null}'
        )
    )
    assert isinstance(call, LMCall) and call.counted and call.attempts == 1 and call.cache_hit is False
    assert call.reply is None and call.reply_text == "" and call.usage.input_tokens == 5


def test_the_viewer_and_the_trace_tool_read_a_trace_of_the_previous_version(tmp_path: Path) -> None:
    from rlmx.serve.trace_text import describe_trace, recent_traces
    from rlmx.view import report_data

    path = tmp_path / "20261201T000000-0ldrun.jsonl"
    path.write_text(OLD_TRACE)
    data = report_data(rlmx.trace.load(path))
    assert data["summary"]["run_id"] == "0ldrun" and data["summary"]["model"] == "openai:old"
    labels = [node["l"] for node in data["nodes"]]
    assert "something_new: " in labels  # the unknown record is a note, its whole record in the details
    (note,) = [node for node in data["nodes"] if node["l"] == "something_new: "]
    assert "from a newer writer" in note["x"][1][1]
    assert any(label.startswith("llm_query: count") for label in labels)
    text = describe_trace(path, turns=True)
    assert text.startswith(f"run 0ldrun (trace: {path})") and "answer: 42" in text
    assert "turn 1: n = llm_query('count') · 1 sub-calls" in text
    assert "- 0ldrun  20261201T000000-0ldrun.jsonl  'How many tickets?'" in recent_traces(tmp_path)
