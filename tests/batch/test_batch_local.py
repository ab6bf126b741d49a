"""`rlmx batch` with the local executor, end to end against the scripted server, through the Python API and
the command line: exact answers, the result lines and their traces, bad input and bad options refused
before any request, resume (after a clean end and after a killed driver), --retry-failed, the batch's own
call and token budgets, the fleet's rate limit, exit codes, Ctrl-C, progress lines and the help."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command

import rlmx.batch
from batch_support import answers_exact, make_ticket_items, read_jsonl, write_jsonl
from policies import tickets_policy
from process_support import session_processes, wait_until
from rlmx import RLM, Limits, ModelOptions
from rlmx.batch.results import FIELDS
from rlmx.testing import Fault, ScriptedModel, ScriptedServer

RLMX = [sys.executable, "-m", "rlmx.cli"]
MODEL = "openai:scripted"


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-fake", "COLUMNS": "200"}
    return subprocess.run([*RLMX, *args], capture_output=True, text=True, env=env, timeout=timeout)


def model_args(srv: ScriptedServer) -> list[str]:
    return ["--model", MODEL, "--base-url", srv.url]


def run_api(
    items: list[dict[str, Any]], srv: ScriptedServer, *, max_iterations: int = 30, **kwargs: Any
) -> rlmx.batch.Batch:
    """The batch as a Python caller runs it: items, an RLM built in Python, the batch's own options."""
    rlm = RLM(
        MODEL, model_options=ModelOptions(base_url=srv.url), limits=Limits(max_iterations=max_iterations)
    )
    return rlmx.batch.run(items, rlm, **kwargs)


def ids(rows: list[Any]) -> list[str]:
    """The ids of result lines, input dicts or BatchItems, as strings."""
    return [str(row.id if isinstance(row, rlmx.batch.BatchItem) else row["id"]) for row in rows]


def server_tokens(request: Any) -> int:
    """The tokens the scripted server counts for one served request (about 4 characters a token)."""
    chars = sum(len(m["content"]) for m in request.messages)
    return math.ceil(chars / 4) + math.ceil(len(request.reply_text or "") / 4)


def check_result_lines(rows: list[dict[str, Any]], gold: dict[str, int]) -> None:
    """One line an id, every documented field, every item final and exact, from this host."""
    assert sorted(ids(rows)) == sorted(gold)
    assert answers_exact(rows, gold) == []
    for row in rows:
        assert set(FIELDS) <= set(row), row
        assert row["stopped_by"] == "final" and row["error"] is None, row
        assert row["answer_source"] == "final_var" and isinstance(row["answer"], int)
        assert row["attempts"] == 1 and row["node"] == socket.gethostname()
        assert row["elapsed_s"] > 0 and row["usage"]["calls"] >= 4


@pytest.fixture()
def tickets(tmp_path: Path) -> tuple[list[dict[str, Any]], dict[str, int]]:
    return make_ticket_items(tmp_path / "data", n=12)


# --- every item answered exactly ---------------------------------------------------------------------


def test_the_api_answers_every_item_exactly_and_writes_one_line_each_with_its_trace(
    tmp_path: Path, tickets: tuple[list[dict[str, Any]], dict[str, int]]
) -> None:
    items, gold = tickets
    out, traces = tmp_path / "results.jsonl", tmp_path / "traces"
    with ScriptedServer(tickets_policy, latency=0.01) as srv:
        batch = run_api(items, srv, out=out, trace_dir=traces, concurrency=4)
        assert srv.requests == []  # nothing runs before the batch is iterated
        yielded = list(batch)
        served = srv.served
    assert sorted(ids(yielded)) == sorted(gold)
    rows = read_jsonl(out)
    assert rows == yielded  # appended as each finished, in that order
    check_result_lines(rows, gold)
    for row in rows:
        trace = Path(row["trace_path"])
        assert trace.is_file() and trace.parent == traces.resolve()
        assert trace.name.startswith(f"{row['id']}.1.")
        records = read_jsonl(trace)
        assert records[0]["type"] == "run_start" and records[-1]["type"] == "run_end"
        assert records[-1]["stopped_by"] == "final"
    summary = batch.summary
    assert summary.exit_code == 0 and summary.by_stopped == Counter(final=12)
    assert (summary.total, summary.ran, summary.skipped, summary.failed) == (12, 12, 0, 0)
    assert summary.fleet["calls"] == served == sum(row["usage"]["calls"] for row in rows)
    assert summary.fleet["reached"] is None
    lines = summary.lines()
    assert lines[0].startswith("[rlmx] batch: 12 items; 12 run now, 0 already done; by outcome: 12 final")
    assert f"{served} model calls" in lines[1]


def test_the_cli_answers_every_item_exactly_and_writes_one_line_each_with_its_trace(
    tmp_path: Path, tickets: tuple[list[dict[str, Any]], dict[str, int]]
) -> None:
    items, gold = tickets
    source, out, traces = tmp_path / "items.jsonl", tmp_path / "results.jsonl", tmp_path / "traces"
    write_jsonl(source, items)
    with ScriptedServer(tickets_policy, latency=0.01) as srv:
        proc = cli("batch", str(source), "--out", str(out), "--trace-dir", str(traces), *model_args(srv))
        served = srv.served
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    rows = read_jsonl(out)
    check_result_lines(rows, gold)
    assert served == sum(row["usage"]["calls"] for row in rows)
    for row in rows:
        trace = Path(row["trace_path"])
        assert trace.is_file() and trace.parent == traces.resolve()
        assert read_jsonl(trace)[-1]["stopped_by"] == "final"
    assert "[rlmx] batch: 12 items; 12 run now, 0 already done; by outcome: 12 final" in proc.stderr


# --- bad input: refused before any request --------------------------------------------------------------


def test_bad_input_lines_are_all_named_in_one_error_and_nothing_runs(tmp_path: Path) -> None:
    context = tmp_path / "ctx.txt"
    context.write_text("some text\n")
    lines = [
        json.dumps({"id": "ok", "question": "q", "context": str(context)}),
        '{"id": "a", "question": "q"',  # 2: not JSON
        '{"question": "q", "context": {"text": "x"}}',  # 3: no id
        '{"id": "ok", "question": "q2"}',  # 4: the id of line 1 again
        '{"id": "b", "question": "   "}',  # 5: an empty question
        json.dumps({"id": "c", "question": "q", "context": str(tmp_path / "missing.txt")}),  # 6
        '{"id": "d", "question": "q", "colour": "red"}',  # 7: an unknown key
        '{"id": "e", "question": "q", "limits": {"max_iterations": 0}}',  # 8: a bad limit
        '{"id": "f", "question": "q", "model": "gpt-5-mini"}',  # 9: not PROVIDER:MODEL
        "",
        '{"id": 7, "question": "q", "context": {"text": "fine"}}',
    ]
    source, out = tmp_path / "items.jsonl", tmp_path / "results.jsonl"
    source.write_text("\n".join(lines) + "\n")
    with ScriptedServer(lambda m, r: "FINAL(never)") as srv:
        proc = cli("batch", str(source), "--out", str(out), *model_args(srv))
        requests = srv.requests
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and requests == [] and not out.exists()
    err = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr and len(err) == 9, proc.stderr
    assert err[0] == f"rlmx: error: {source}: 8 bad input lines; nothing was run:"
    named = [int(m.group(1)) for line in err[1:] if (m := re.match(r"  line (\d+): ", line))]
    assert named == [2, 3, 4, 5, 6, 7, 8, 9]
    expected = {
        2: "not JSON",
        3: '"id" is required',
        4: "id 'ok' repeats line 1",
        5: '"question" is required',
        6: "missing.txt' not found",
        7: "unknown key colour",
        8: "max_iterations must be >= 1",
        9: '"model" must be a model string PROVIDER:MODEL',
    }
    for number, line in zip(named, err[1:], strict=True):
        assert expected[number] in line, line


def test_models_and_contexts_that_cannot_run_are_refused_by_line_before_any_request(tmp_path: Path) -> None:
    items = [
        {"id": "ok", "question": "q", "context": {"text": "hello"}},
        {"id": "g", "question": "q", "model": "nosuch:model"},
        {"id": "h", "question": "q", "context": {"text": ""}},
        {"id": "i", "question": "q", "context": {"text": "x"}, "sub_model": "bogus:thing"},
    ]
    out = tmp_path / "results.jsonl"
    with ScriptedServer(lambda m, r: "FINAL(never)") as srv:
        with pytest.raises(rlmx.batch.BatchInputError) as caught:
            run_api(items, srv, out=out)
        requests = srv.requests
    assert requests == [] and not out.exists()
    problems = caught.value.problems
    assert [p.split(":", 1)[0] for p in problems] == ["line 2", "line 3", "line 4"]
    assert "unknown provider 'nosuch'" in problems[0] and "unknown provider 'bogus'" in problems[2]
    assert "the context holds no usable text" in problems[1]
    assert str(caught.value).startswith("batch input: 3 bad input lines; nothing was run:")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--batch-max-llm-calls", "1"], "--batch-max-llm-calls must be >= 2"),
        (["--batch-max-total-tokens", "0"], "--batch-max-total-tokens must be >= 1"),
        (["--batch-max-cost-usd", "0"], "--batch-max-cost-usd must be > 0"),
        (["--batch-max-cost-usd", "1"], "--batch-max-cost-usd cannot be enforced: no price known for"),
        (["--rpm", "0"], "--rpm and --tpm must be at least 1"),
        (["--rate-window", "0"], "--rate-window must be > 0 seconds"),
        (["--executor", "nope"], "unknown executor 'nope'; choose local or ray"),
        (["--address", "auto"], "--address is for the ray executor"),
        (["--concurrency", "0"], "Invalid value for '--concurrency'"),
    ],
)
def test_bad_batch_options_are_one_line_exit_2_and_nothing_runs(
    tmp_path: Path, flags: list[str], expected: str
) -> None:
    source, out = tmp_path / "items.jsonl", tmp_path / "results.jsonl"
    write_jsonl(source, [{"id": "a", "question": "q", "context": {"text": "some text"}}])
    with ScriptedServer(lambda m, r: "FINAL(never)") as srv:
        proc = cli("batch", str(source), "--out", str(out), *flags, *model_args(srv))
        requests = srv.requests
    assert proc.returncode == 2 and proc.stdout == "" and requests == [] and not out.exists()
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("rlmx: error: ") and expected in proc.stderr, proc.stderr
    assert len(lines) == 1, proc.stderr  # an option's problem: said once, not for every item


# --- resume ----------------------------------------------------------------------------------------------


def test_a_rerun_skips_what_is_written_and_runs_only_the_ids_missing_from_the_results(
    tmp_path: Path, tickets: tuple[list[dict[str, Any]], dict[str, int]]
) -> None:
    items, gold = tickets
    out = tmp_path / "results.jsonl"
    with ScriptedServer(tickets_policy, latency=0.01) as srv:
        first = run_api(items, srv, out=out)
        list(first)
        before, written = len(srv.requests), out.read_bytes()

        again = run_api(items, srv, out=out)
        assert again.todo == [] and list(again) == []
        assert len(srv.requests) == before and out.read_bytes() == written
        assert again.summary.exit_code == first.summary.exit_code == 0
        assert (again.summary.skipped, again.summary.ran) == (12, 0)
        assert again.summary.by_stopped == Counter(final=12)

        kept = [row for row in read_jsonl(out) if row["id"] not in ("t003", "t007")]
        write_jsonl(out, kept)
        third = run_api(items, srv, out=out)
        assert ids(third.todo) == ["t003", "t007"]
        rerun = list(third)
        new_requests = srv.requests[before:]
    assert sorted(ids(rerun)) == ["t003", "t007"]
    assert len(new_requests) == sum(row["usage"]["calls"] for row in rerun)
    assert third.summary.exit_code == 0 and (third.summary.skipped, third.summary.ran) == (10, 2)
    rows = read_jsonl(out)
    assert rows[:10] == kept  # the lines kept are untouched; the two reruns are appended
    check_result_lines(rows, gold)


def test_a_last_line_cut_short_by_a_killed_driver_is_dropped_and_its_item_runs_again(
    tmp_path: Path, tickets: tuple[list[dict[str, Any]], dict[str, int]]
) -> None:
    items, gold = tickets
    out = tmp_path / "results.jsonl"
    with ScriptedServer(tickets_policy, latency=0.01) as srv:
        list(run_api(items, srv, out=out))
        complete = [row for row in read_jsonl(out) if row["id"] != "t005"]
        write_jsonl(out, complete)
        with out.open("a") as handle:  # the driver died in the middle of writing t005's line
            handle.write('{"id": "t005", "answer": 5, "answer_source": "fin')
        before = len(srv.requests)
        resumed = run_api(items, srv, out=out)
        assert ids(resumed.todo) == ["t005"]
        assert ids(list(resumed)) == ["t005"]
        assert len(srv.requests) > before

        with out.open("a") as handle:  # cut short again, this time an id whose line is complete
            handle.write('{"id": "t001", "answer": 6, "answ')
        before = len(srv.requests)
        idle = run_api(items, srv, out=out)
        assert idle.todo == [] and list(idle) == []
        assert len(srv.requests) == before
    lines = out.read_text().split("\n")
    assert lines[-1] == "" and len(lines) == 13  # twelve lines, each ended, and no fragment after them
    rows = [json.loads(line) for line in lines[:-1]]
    assert ids(rows) == ids(items)  # compacted (a fragment was dropped), in the input's order
    assert [row for row in rows if row["id"] != "t005"] == sorted(
        complete, key=lambda r: ids(items).index(r["id"])
    )
    check_result_lines(rows, gold)


# --- failed items and --retry-failed ----------------------------------------------------------------------

MARKER = "(escalated)"


def fail_marked(request: Any) -> Fault | None:
    """An HTTP 400 for every request of the items whose question carries MARKER."""
    if any(MARKER in m["content"] for m in request.messages):
        return Fault.status(400, message="scripted: this request is refused")
    return None


def test_failed_items_are_rerun_with_retry_failed_and_the_results_rewritten_one_line_an_id(
    tmp_path: Path, tickets: tuple[list[dict[str, Any]], dict[str, int]]
) -> None:
    items, gold = tickets
    failing = {"t002", "t009"}
    items = [
        {**item, "question": f"{item['question']} {MARKER}"} if item["id"] in failing else item
        for item in items
    ]
    folder = tmp_path / "out"
    out = folder / "results.jsonl"
    with ScriptedServer(tickets_policy, latency=0.01, faults=fail_marked) as srv:
        first = run_api(items, srv, out=out)
        list(first)
    assert first.summary.exit_code == 1 and first.summary.failed == 2
    rows = read_jsonl(out)
    assert len(rows) == 12
    failed = [row for row in rows if row["error"] is not None]
    assert sorted(ids(failed)) == sorted(failing)
    for row in failed:
        assert row["stopped_by"] == "error" and row["answer"] is None and row["attempts"] == 1
        assert "400" in row["error"], row["error"]
    assert answers_exact([row for row in rows if row["id"] not in failing], gold) == []

    with ScriptedServer(tickets_policy, latency=0.01) as healthy:
        plain = run_api(items, healthy, out=out)
        assert plain.todo == [] and list(plain) == [] and healthy.requests == []
        assert plain.summary.exit_code == 1

        retried = run_api(items, healthy, out=out, retry_failed=True)
        assert sorted(ids(retried.todo)) == sorted(failing)
        assert sorted(ids(list(retried))) == sorted(failing)
    assert retried.summary.exit_code == 0 and retried.summary.failed == 0
    rows = read_jsonl(out)
    check_result_lines(rows, gold)
    assert ids(rows) == ids(items)  # rewritten in the input's order
    assert sorted(p.name for p in folder.iterdir()) == ["results.jsonl"]  # no temporary file left


# --- the batch's own budgets -------------------------------------------------------------------------------


def unstarted(row: dict[str, Any], limit: str) -> bool:
    """The line of an item a batch limit kept from starting."""
    return (row["stopped_by"], row["attempts"], row["answer"], row["answer_source"], row["error"]) == (
        limit,
        0,
        None,
        "none",
        None,
    )


def test_a_batch_call_budget_bounds_the_requests_served_and_a_rerun_finishes_the_unstarted(
    tmp_path: Path,
) -> None:
    items, gold = make_ticket_items(tmp_path / "data", n=8)  # about 99 calls in all; at least 7 an item
    out = tmp_path / "results.jsonl"
    with ScriptedServer(tickets_policy, latency=0.01) as srv:
        limited = run_api(items, srv, out=out, concurrency=4, limits=rlmx.batch.BatchLimits(max_llm_calls=30))
        list(limited)
        served = srv.served
        assert served <= 30 and limited.summary.fleet["calls"] == served
        assert limited.summary.fleet["reached"] == "batch_max_llm_calls"
        assert limited.summary.exit_code == 3 and limited.summary.failed == 0
        rows = read_jsonl(out)
        assert sorted(ids(rows)) == sorted(gold)
        waiting = [row for row in rows if unstarted(row, "batch_max_llm_calls")]
        stopped = [row for row in rows if row["stopped_by"] == "batch_max_llm_calls" and row not in waiting]
        done = [row for row in rows if row["stopped_by"] == "final"]
        # 30 calls cannot finish four items (the four cheapest need 38), so some never started, and at
        # least one of the four admitted first was stopped mid-run with its forced final answer
        assert waiting and stopped and len(waiting) + len(stopped) + len(done) == 8
        for row in waiting:
            assert row["usage"] == {} and row["node"] is None
        for row in stopped:  # the batch held its final answer's call: an answer, not a failure
            assert row["attempts"] == 1 and row["error"] is None and row["answer_source"] == "final"
        assert answers_exact(done, gold) == []
        assert sum(row["usage"].get("calls", 0) for row in rows) == served

        finish = run_api(items, srv, out=out, concurrency=4)
        assert sorted(ids(finish.todo)) == sorted(ids(waiting))
        rerun = list(finish)
    assert sorted(ids(rerun)) == sorted(ids(waiting))
    assert all(row["stopped_by"] == "final" for row in rerun) and answers_exact(rerun, gold) == []
    assert finish.summary.exit_code == 3  # the items stopped mid-run keep their forced answers
    assert finish.summary.by_stopped == Counter(
        final=len(done) + len(waiting), batch_max_llm_calls=len(stopped)
    )
    final_rows = read_jsonl(out)
    assert ids(final_rows) == ids(items)  # compacted in the input's order: the unstarted lines replaced
    assert [row for row in final_rows if row["id"] in ids(stopped)] == sorted(stopped, key=lambda r: r["id"])


def test_a_batch_token_budget_holds_for_every_call_but_the_forced_final_answers(tmp_path: Path) -> None:
    """What the fleet guarantees: an ordinary call is granted only while the tokens of the settled calls,
    the estimates of the calls in flight and its own estimate stay under the budget; the forced final
    answer of each running item is granted regardless. With one call in flight an item (no sub-calls),
    the ordinary calls' tokens exceed the budget by less than one call's worth per running item."""
    script = ScriptedModel(
        root=["```repl\nprint('x' * 40)\n```"] * 3 + ["FINAL(done)"], final="FINAL(forced)"
    )
    items = [
        {"id": f"i{i}", "question": "q", "context": {"text": f"item {i}: " + "words " * 150}}
        for i in range(8)
    ]
    out, budget, concurrency = tmp_path / "results.jsonl", 9000, 2
    with ScriptedServer(script, latency=0.01) as srv:
        limited = run_api(
            items,
            srv,
            out=out,
            concurrency=concurrency,
            limits=rlmx.batch.BatchLimits(max_total_tokens=budget),
        )
        list(limited)
        requests, usage = srv.requests, srv.usage_served
        total = usage["input_tokens"] + usage["output_tokens"]
        assert sum(server_tokens(r) for r in requests) == total
        assert limited.summary.fleet["total_tokens"] == total  # the ledger books what the server counted
        assert limited.summary.fleet["reached"] == "batch_max_total_tokens"
        ordinary = [server_tokens(r) for r in requests if r.purpose != "final"]
        finals = [r for r in requests if r.purpose == "final"]
        assert sum(ordinary) < budget + concurrency * max(ordinary)
        assert 1 <= len(finals) <= concurrency
        rows = read_jsonl(out)
        waiting = [row for row in rows if unstarted(row, "batch_max_total_tokens")]
        assert waiting and limited.summary.exit_code == 3 and limited.summary.failed == 0
        for row in rows:
            assert row["stopped_by"] in ("final", "batch_max_total_tokens") and row["error"] is None
            assert row["answer"] in (None, "forced", "done")

        finish = run_api(items, srv, out=out, concurrency=concurrency)
        rerun = list(finish)
    assert sorted(ids(rerun)) == sorted(ids(waiting))
    assert all(row["stopped_by"] == "final" and row["answer"] == "done" for row in rerun)
    assert sorted(ids(read_jsonl(out))) == sorted(ids(items))


# --- the fleet's rate limit --------------------------------------------------------------------------------


def test_the_fleet_rate_limit_holds_in_every_window_across_concurrent_items(tmp_path: Path) -> None:
    """240 requests a minute over a 0.5 s window: 2 requests in any 0.5 s. The fleet keeps each grant for
    the window plus 0.25 s of slack, so requests that reach the server up to 0.25 s after their grant
    still fit: the server sees at most 2 requests in any 0.5 s."""
    script = ScriptedModel(root=["```repl\nx = 1\n```", "FINAL(done)"])
    items = [{"id": f"r{i}", "question": "q", "context": {"text": f"text {i}"}} for i in range(4)]
    window, allowed = 0.5, 2
    with ScriptedServer(script, latency=0.01) as srv:
        batch = run_api(
            items, srv, out=tmp_path / "results.jsonl", concurrency=4, rpm=240, rate_window_s=window
        )
        rows = list(batch)
        times = sorted(r.t_received for r in srv.requests)
    assert [row["answer"] for row in rows] == ["done"] * 4 and batch.summary.exit_code == 0
    assert len(times) == 8
    for first, later in zip(times, times[allowed:], strict=False):
        assert later - first >= window, times  # any `allowed + 1` requests span at least the window
    assert batch.summary.fleet["rate_waits"] > 0


# --- the command line: exit codes, Ctrl-C, progress, help ---------------------------------------------------


def test_the_exit_code_says_failed_limited_or_all_final(
    tmp_path: Path, tickets: tuple[list[dict[str, Any]], dict[str, int]]
) -> None:
    items, gold = tickets
    failing = {"t004"}
    items = [
        {**item, "question": f"{item['question']} {MARKER}"} if item["id"] in failing else item
        for item in items
    ]
    source, folder = tmp_path / "items.jsonl", tmp_path / "out"
    out, limited_out = folder / "results.jsonl", folder / "limited.jsonl"
    write_jsonl(source, items)
    with ScriptedServer(tickets_policy, latency=0.01, faults=fail_marked) as srv:
        failed = cli("batch", str(source), "--out", str(out), "--quiet", *model_args(srv))
    with ScriptedServer(tickets_policy, latency=0.01) as srv:
        retried = cli("batch", str(source), "--out", str(out), "--retry-failed", "--quiet", *model_args(srv))
        retry_requests = len(srv.requests)
        srv.reset()
        limited = cli(
            "batch", str(source), "--out", str(limited_out), "--batch-max-llm-calls", "20", *model_args(srv)
        )
        limited_served = srv.served
    assert (failed.returncode, failed.stderr) == (1, "")
    assert retried.returncode == 0, retried.stderr
    rows = read_jsonl(out)
    check_result_lines(rows, gold)
    assert retry_requests == next(row["usage"]["calls"] for row in rows if row["id"] == "t004")
    assert sorted(p.name for p in folder.iterdir()) == ["limited.jsonl", "results.jsonl"]  # no temp file
    assert limited.returncode == 3, limited.stderr
    assert limited_served <= 20
    assert "[rlmx] the batch limit batch_max_llm_calls was reached" in limited.stderr
    rows = read_jsonl(limited_out)
    assert sorted(ids(rows)) == sorted(gold)
    assert any(unstarted(row, "batch_max_llm_calls") for row in rows)


def result_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_ctrl_c_stops_the_batch_leaves_valid_results_and_a_rerun_finishes_it(
    tmp_path: Path, tickets: tuple[list[dict[str, Any]], dict[str, int]]
) -> None:
    items, gold = tickets
    source, out = tmp_path / "items.jsonl", tmp_path / "results.jsonl"
    write_jsonl(source, items)
    args = ["batch", str(source), "--out", str(out), "--concurrency", "2"]
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-fake"}
    with ScriptedServer(tickets_policy, latency=0.15) as srv:
        proc = subprocess.Popen(
            [*RLMX, *args, *model_args(srv)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            assert wait_until(lambda: result_lines(out) >= 2 or proc.poll() is not None, 60)
            assert proc.poll() is None and result_lines(out) >= 2, proc.communicate(timeout=30)[1]
            os.kill(proc.pid, signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert stdout == "" and "Traceback" not in stderr
    assert wait_until(lambda: not session_processes(proc.pid), 10), session_processes(proc.pid)
    rows = read_jsonl(out)  # every line is JSON
    assert out.read_bytes().endswith(b"\n")
    assert stderr.splitlines()[-1] == (
        f"rlmx: interrupted; the results so far are in {out}; run the same command to resume"
    ), stderr
    assert 2 <= len(rows) < 12 and len(set(ids(rows))) == len(rows)
    assert answers_exact(rows, gold) == [] and all(row["stopped_by"] == "final" for row in rows)

    with ScriptedServer(tickets_policy, latency=0.01) as srv:
        again = cli(*args, *model_args(srv))
    assert again.returncode == 0, again.stderr
    assert f"[rlmx] resuming: {len(rows)} of 12 items already in {out}" in again.stderr
    final = read_jsonl(out)
    check_result_lines(final, gold)
    assert [row for row in final if row["id"] in ids(rows)] == rows


PROGRESS = re.compile(
    r"^\[rlmx\] (\d+)/(\d+) (\S+) (\S+); \d+ failed, \d+ running, (?:\$\d+\.\d{4}|cost unknown), "
    r"ETA \S+( s| min)?$"
)


def test_progress_is_a_line_an_item_then_the_summary_and_quiet_prints_nothing(tmp_path: Path) -> None:
    items, gold = make_ticket_items(tmp_path / "data", n=4)
    source, out = tmp_path / "items.jsonl", tmp_path / "results.jsonl"
    write_jsonl(source, items)
    with ScriptedServer(tickets_policy, latency=0.01) as srv:
        proc = cli("batch", str(source), "--out", str(out), *model_args(srv))
        write_jsonl(out, [row for row in read_jsonl(out) if row["id"] != "t002"])
        resumed = cli("batch", str(source), "--out", str(out), *model_args(srv))
        quiet_out = tmp_path / "quiet.jsonl"
        quiet = cli("batch", str(source), "--out", str(quiet_out), "--quiet", *model_args(srv))
        quiet_again = cli("batch", str(source), "--out", str(quiet_out), "-q", *model_args(srv))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 6, proc.stderr
    matches = [PROGRESS.match(line) for line in lines[:4]]
    assert all(matches), lines[:4]
    assert [(m.group(1), m.group(2), m.group(4)) for m in matches] == [
        (str(k), "4", "final") for k in (1, 2, 3, 4)
    ]
    assert sorted(m.group(3) for m in matches) == sorted(gold)
    assert lines[4] == "[rlmx] batch: 4 items; 4 run now, 0 already done; by outcome: 4 final"
    # openai:scripted has no price: every line says so, as the result lines do (never a $0.0000)
    assert all("cost unknown" in line for line in lines[:4]), lines[:4]
    assert re.match(r"^\[rlmx\] usage: \d+ model calls, [\d,]+ tokens, cost unknown; [\d.]+ s wall", lines[5])
    assert [row["usage"]["cost_usd"] for row in read_jsonl(out)] == [None] * 4

    assert resumed.returncode == 0, resumed.stderr
    lines = resumed.stderr.splitlines()
    assert lines[0] == f"[rlmx] resuming: 3 of 4 items already in {out}"
    assert lines[1].startswith("[rlmx] 1/1 t002 final; 0 failed, ") and PROGRESS.match(lines[1])
    assert lines[2] == "[rlmx] batch: 4 items; 1 run now, 3 already done; by outcome: 4 final"
    assert len(lines) == 4

    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    assert (quiet_again.returncode, quiet_again.stdout, quiet_again.stderr) == (0, "", "")
    check_result_lines(read_jsonl(quiet_out), gold)


def test_batch_help_names_every_option_of_the_command() -> None:
    from rlmx.cli import app

    command: Any = get_command(app).commands["batch"]  # type: ignore[attr-defined]
    proc = cli("batch", "--help")
    assert proc.returncode == 0 and proc.stderr == ""
    shown = proc.stdout
    assert "Usage: rlmx batch [OPTIONS] INPUT.jsonl" in shown
    flags = [
        flag
        for param in command.params
        for flag in (*param.opts, *param.secondary_opts)
        if flag.startswith("-")
    ]
    assert len(flags) > 50 and "--retry-failed" in flags and "--batch-max-llm-calls" in flags
    missing = [flag for flag in flags if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", shown)]
    assert missing == []
    fields = ", ".join(FIELDS)
    assert f"A result line: {fields}." in " ".join(shown.split())


# --- an item's own settings ---------------------------------------------------------------------------


def test_an_items_own_model_and_limits_override_the_batch_defaults(
    tmp_path: Path, tickets: tuple[list[dict[str, Any]], dict[str, int]]
) -> None:
    items, gold = tickets
    rows = [
        items[0],
        {**items[1], "limits": {"max_iterations": 1}},  # the script needs four turns
        {**items[2], "model": "openai:other"},
    ]
    with ScriptedServer(tickets_policy, latency=0.01, models=("scripted", "other")) as srv:
        results = {r["id"]: r for r in run_api(rows, srv, max_iterations=10)}
        models = Counter(r.model for r in srv.requests)
    first, limited, other = (results[row["id"]] for row in rows)
    assert first["stopped_by"] == "final" and answers_exact([first], gold) == []
    assert limited["stopped_by"] == "max_iterations" and limited["answer_source"] != "none"
    assert other["stopped_by"] == "final" and answers_exact([other], gold) == []
    assert set(other["usage"]["by_model"]) == {"openai:other"}
    assert models["other"] == other["usage"]["calls"] and models["scripted"] > 0


def test_a_driver_killed_outright_is_resumed_by_the_same_command(
    tmp_path: Path, tickets: tuple[list[dict[str, Any]], dict[str, int]]
) -> None:
    """SIGKILL: no handler runs. Every line written before stays; a rerun runs the rest, one line an id."""
    items, gold = tickets
    source, out = tmp_path / "items.jsonl", tmp_path / "results.jsonl"
    write_jsonl(source, items)
    args = ["batch", str(source), "--out", str(out), "--concurrency", "2"]
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-fake"}
    with ScriptedServer(tickets_policy, latency=0.1) as srv:
        proc = subprocess.Popen(
            [*RLMX, *args, *model_args(srv)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        try:
            assert wait_until(lambda: result_lines(out) >= 3 or proc.poll() is not None, 60)
            os.killpg(proc.pid, signal.SIGKILL)  # the driver and its sandboxes
            proc.wait(30)
        finally:
            proc.kill()
        whole = out.read_bytes().rpartition(b"\n")[0].decode()  # a line the kill cut short is not a result
        before = [json.loads(line) for line in whole.splitlines()]
        assert 3 <= len(before) < len(items)
        again = cli(*args, *model_args(srv))
    assert again.returncode == 0, again.stderr
    final = read_jsonl(out)
    check_result_lines(final, gold)
    assert [row for row in final if row["id"] in ids(before)] == before
