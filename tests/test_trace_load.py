"""`rlmx.trace.load`: typed events, the call tree of a depth-2 run, and usage recomputed from the trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import rlmx.trace
from observability_runs import depth2_policy, run_depth2
from policies import is_root, repl, turn
from rlmx import RLM, ConfigError, Limits, ModelOptions
from rlmx.testing import ScriptedServer
from rlmx.trace import Cell, LMCall


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
        assert any(e.type == "fallback" for e in child_cell.events)
    assert [n.depth for n in trace.nodes()] == [0, 1, 1]
    # every model call of the run is somewhere in the tree, exactly once
    assert sorted(c.id for c in root.lm_calls()) == sorted(c.id for c in trace.lm_calls())


def test_events_are_typed_and_every_parent_exists(depth2: tuple[Any, Path, list[Any]]) -> None:
    _, path, _ = depth2
    trace = rlmx.trace.load(path)
    assert trace.events[0].type == "run_start" and trace.run_end is not None
    assert all(isinstance(e, LMCall) for e in trace.of_type("lm_call"))
    ids = [e.id for e in trace.events]
    assert len(ids) == len(set(ids))
    assert all(e.parent_id is None or e.parent_id in trace.by_id for e in trace.events)
    call = trace.lm_calls()[0]
    assert call.model == "openai:scripted" and call.messages[0][0] == "system" and call.reply
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


def test_trace_full_keeps_whole_texts_and_the_default_caps_them(tmp_path: Path) -> None:
    long_prompt = "x" * 3_000 + "MIDDLE" + "y" * 3_000

    def policy(messages: list[dict[str, Any]], request: Any = None) -> str:
        if not is_root(messages):
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
        texts[name] = (sub.data["messages"][0], sub.data["reply"])
    prompt, reply = texts["full"]
    assert prompt == {"role": "user", "chars": len(long_prompt), "text": long_prompt}
    assert reply["text"] == "z" * 5_000
    prompt, reply = texts["capped"]
    assert "MIDDLE" not in json.dumps(prompt) and prompt["chars"] == len(long_prompt)
    assert len(prompt["head"]) == len(prompt["tail"]) == 2_000 and len(reply["head"]) == 2_000
