"""The RLM loop through the scripted OpenAI-compatible server: the core contract, end to end."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from examples.support_tickets.generate import QUESTION, generate

from policies import is_child, is_forced_final, is_rlm, is_root, is_sub, last_user, repl, tickets_policy, turn
from rlmx import RLM, HistorySettings, Limits, ModelOptions, SandboxSettings
from rlmx.testing import ScriptedModel, ScriptedServer


def make_rlm(srv: ScriptedServer, **kw: Any) -> RLM:
    return RLM("openai:scripted", model_options=ModelOptions(base_url=srv.url), **kw)


def records(path: str | None) -> list[dict[str, Any]]:
    assert path is not None
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_tickets_example_is_answered_exactly() -> None:
    text, gold, tickets = generate(seed=0)
    with ScriptedServer(tickets_policy) as srv:
        result = make_rlm(srv).run(QUESTION, text)
        sub_calls = [r for r in srv.requests if is_sub(r)]
    assert result.stopped_by == "final", result.error
    assert result.answer == gold
    targets = [t for t in tickets if t.user_id in ("12345", "67890", "11111")]
    assert len(sub_calls) == len(targets)  # one classification per ticket of the three users
    assert result.iterations == 4
    assert result.usage["calls"] == srv.served


def test_max_depth_0_refuses_sub_calls_in_the_repl() -> None:
    policy = ScriptedModel(
        root=[
            repl("try:\n    llm_query('hi')\nexcept Exception as exc:\n    print('refused:', exc)"),
            "FINAL(done)",
        ]
    )
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv, limits=Limits(max_depth=0)).run("q", "ctx")
        assert all(is_root(r) for r in srv.requests)
        second = srv.requests[1].messages
    assert result.answer == "done"
    assert "refused:" in last_user(second) and "max_depth=0" in last_user(second)
    assert "disabled in this run (max_depth=0)" in second[0]["content"]  # the prompt says so


def test_max_depth_1_rlm_query_falls_back_to_a_plain_call_and_is_recorded() -> None:
    policy = ScriptedModel(
        root=[repl("r = rlm_query('summarise', context='some text')\nprint(r)"), "FINAL_VAR(r)"]
    )
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv, limits=Limits(max_depth=1)).run("q", "ctx")
        subs = [r for r in srv.requests if is_sub(r)]
    assert result.answer == "sub-answer"
    assert len(subs) == 1 and "summarise" in subs[0].messages[0]["content"]
    assert "some text" in subs[0].messages[0]["content"]  # the given context travels with the fallback
    fallbacks = [r for r in records(result.trace_path) if r["type"] == "fallback"]
    assert len(fallbacks) == 1 and fallbacks[0]["depth"] == 0
    assert "fall back to plain `llm_query`" in srv.requests[0].messages[0]["content"]


def depth2_policy(messages: list[dict[str, Any]], request: Any) -> str:
    if not is_rlm(request):
        return "leaf"
    t = turn(messages)
    if is_child(request):  # the child RLMs at depth 1 (asked to "count lines A" and "B")
        if t == 0:
            return repl(
                "import os\nn = len(context.splitlines())\nprint('secret' in globals(), os.getpid())\n"
                "leaf = rlm_query('deeper?')\nprint(leaf)"
            )
        return "FINAL_VAR(n)"
    if t == 0:
        return repl(
            "import os\nsecret = 1\nroot_pid = os.getpid()\n"
            "answers = rlm_query_batched(['count lines A', 'count lines B'], contexts=['a\\nb\\nc', 'x\\ny'])\n"
            "print(answers)"
        )
    return "FINAL_VAR(answers)"


def test_max_depth_2_children_run_their_own_repls() -> None:
    with ScriptedServer(depth2_policy) as srv:
        result = make_rlm(srv, limits=Limits(max_depth=2)).run("q", "root context")
    assert result.stopped_by == "final"
    assert result.answer == ["3", "2"]
    recs = records(result.trace_path)
    starts = [r for r in recs if r["type"] == "child_start"]
    assert len(starts) == 2 and all(r["depth"] == 1 for r in starts)
    child_execs = [r for r in recs if r["type"] == "exec" and r["depth"] == 1]
    assert len(child_execs) == 2
    for rec in child_execs:  # the child's REPL does not see the root's variables
        assert rec["output"]["text"].startswith("False ")
    pids = {int(re.search(r"False (\d+)", r["output"]["text"]).group(1)) for r in child_execs}
    assert len(pids) == 2  # two separate worker processes
    fallbacks = [r for r in recs if r["type"] == "fallback"]
    assert len(fallbacks) == 2 and all(r["depth"] == 1 for r in fallbacks)  # depth 1 + 1 == max_depth
    assert all(r["parent_id"] in {c["id"] for c in child_execs} for r in fallbacks)
    assert [r["child_id"] for r in recs if r["type"] == "child_end"] and result.usage["by_depth"]["1"][
        "calls"
    ] >= 2


def test_max_llm_calls_never_exceeded_with_batched_children_and_final_is_made() -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if not is_rlm(request):
            return "leaf"
        if is_forced_final(request):
            return "FINAL(forced answer)"
        if is_child(request):
            return repl("out = llm_query_batched(['a', 'b', 'c', 'd', 'e'])\nprint(out)")
        return repl("res = rlm_query_batched(['child %d' % i for i in range(8)])\nprint(res)")

    with ScriptedServer(policy) as srv:
        result = make_rlm(srv, limits=Limits(max_depth=2, max_llm_calls=12)).run("q", "ctx")
        requests = srv.requests
    assert len(requests) <= 12
    assert result.stopped_by == "max_llm_calls"
    assert result.answer == "forced answer"
    assert is_forced_final(requests[-1]) and is_root(requests[-1])
    assert result.usage["calls"] == len(requests)


def test_budget_exhausted_raises_in_the_repl_for_a_single_call() -> None:
    policy = ScriptedModel(
        root=[
            repl(
                "try:\n    for i in range(10):\n        llm_query(str(i))\nexcept Exception as exc:\n    print(type(exc).__name__, exc)"
            )
        ]
    )
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv, limits=Limits(max_llm_calls=5)).run("q", "ctx")
        out = srv.requests[-1].messages[-2]["content"]  # the last is the forced-final request
        assert len(srv.requests) == 5
    assert "BudgetExhaustedError budget exhausted" in out
    assert result.stopped_by == "max_llm_calls" and result.answer == "forced"


def test_final_inside_a_string_or_prose_does_not_terminate() -> None:
    policy = ScriptedModel(
        root=[
            repl('s = "FINAL(42)"\nprint(s)\n# FINAL(43)') + "\nI will write FINAL(x) when done.\n",
            "FINAL(real answer)",
        ]
    )
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv).run("q", "ctx")
    assert result.answer == "real answer"
    assert result.iterations == 2


def test_final_line_after_code_runs_the_code_first() -> None:
    policy = ScriptedModel(root=[repl("total = sum(range(10))") + "\nFINAL_VAR(total)\n"])
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv).run("q", "ctx")
    assert result.answer == 45 and result.iterations == 1


def test_code_errors_go_back_to_the_model_and_the_run_goes_on() -> None:
    def policy(messages: list[dict[str, Any]], request: Any = None) -> str:
        if turn(messages) == 0:
            return repl("x = 1 / 0")
        return (
            f"FINAL({'saw ZeroDivisionError' if 'ZeroDivisionError' in last_user(messages) else 'no error'})"
        )

    with ScriptedServer(policy) as srv:
        result = make_rlm(srv).run("q", "ctx")
    assert result.answer == "saw ZeroDivisionError" and result.stopped_by == "final"


def test_a_final_after_failing_code_is_not_accepted() -> None:
    policy = ScriptedModel(root=[repl("y = undefined_name") + "\nFINAL_VAR(y)\n", "FINAL(second try)"])
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv).run("q", "ctx")
        feedback = last_user(srv.requests[1].messages)
    assert result.answer == "second try"
    assert "NameError" in feedback and "was not accepted" in feedback


def test_long_output_is_truncated_with_a_marker() -> None:
    policy = ScriptedModel(root=[repl("print('H' * 30000 + 'T' * 20000)"), "FINAL(ok)"])
    with ScriptedServer(policy) as srv:
        make_rlm(srv).run("q", "ctx")
        out = last_user(srv.requests[1].messages)
    match = re.search(r"\[(\d+) characters omitted\]", out)
    assert match and int(match.group(1)) == 50001 - 20000
    assert "HHHH" in out and "TTTT" in out and len(out) < 21000


def test_output_limit_is_configurable() -> None:
    policy = ScriptedModel(root=[repl("print('x' * 5000)"), "FINAL(ok)"])
    with ScriptedServer(policy) as srv:
        make_rlm(srv, sandbox=SandboxSettings(output_chars=1000)).run("q", "ctx")
        out = last_user(srv.requests[1].messages)
    assert "[4001 characters omitted]" in out


def test_history_is_compacted_on_a_long_run_and_the_repl_keeps_everything() -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if request.purpose == "compaction":
            return "summary: printed blocks so far"
        t = turn(messages)
        if t < 8:
            return repl(f"print('{t}' * 3000)")
        return (
            repl("n_history = len(history)\nroles = [m['role'] for m in history]")
            + "\nFINAL_VAR(n_history)\n"
        )

    settings = HistorySettings(context_window=4000, compact_at=0.6, keep_recent_turns=2)
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv, history=settings).run("q", "ctx")
        root_sizes = [sum(len(m["content"]) for m in r.messages) for r in srv.requests if is_root(r)]
    recs = records(result.trace_path)
    assert any(r["type"] == "compaction" for r in recs)
    compactions = [r for r in recs if r["type"] == "lm_call" and r["purpose"] == "compaction"]
    assert compactions and result.usage["calls"] == 9 + len(compactions)
    # everything is in `history`: system, question, 8 turns of (assistant, user), and the last assistant reply
    assert result.answer == 2 + 2 * 8 + 1
    full = 3000 * 8
    assert max(root_sizes) < full  # what the model is sent stays bounded
    assert any("summary: printed blocks so far" in m["content"] for r in srv.requests for m in r.messages)


def trace_size(context: str) -> int:
    policy = ScriptedModel(
        root=[
            repl("print(len(context))\nprint(peek(0, 100))"),
            repl("hits = grep('needle')\nprint(hits)"),
            "FINAL(done)",
        ]
    )
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv).run("q", context)
    return Path(result.trace_path or "").stat().st_size


def test_trace_size_does_not_grow_with_the_context() -> None:
    small = ("hay " * 2500)[:10_000]
    big = ("hay " * 2_500_000)[:10_000_000]
    small_size, big_size = trace_size(small), trace_size(big)
    assert abs(big_size - small_size) < 200, (small_size, big_size)  # only the digits of sizes differ


def test_cell_timeout_restarts_the_repl_and_the_run_goes_on() -> None:
    def policy(messages: list[dict[str, Any]], request: Any = None) -> str:
        t = turn(messages)
        if t == 0:
            return repl("keep = 1\nwhile True:\n    pass")
        if t == 1:
            return repl("print('keep' in globals(), len(context))")
        return "FINAL(" + last_user(messages).split("Output:\n", 1)[1].strip() + ")"

    with ScriptedServer(policy) as srv:
        result = make_rlm(srv, sandbox=SandboxSettings(cell_timeout_s=1.0)).run("q", "abc")
        first = last_user(srv.requests[1].messages)
    assert "TimeoutError" in first and "the REPL was restarted; variables were lost" in first
    assert result.answer == "False 3"


def test_a_cell_that_kills_its_worker_is_recovered() -> None:
    policy = ScriptedModel(root=[repl("import os\nos._exit(3)"), repl("print(len(context))"), "FINAL(ok)"])
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv).run("q", "abcd")
        assert "REPL process died" in last_user(srv.requests[1].messages)
        assert "Output:\n4" in last_user(srv.requests[2].messages)
    assert result.answer == "ok"


def test_max_iterations_forces_a_final_answer() -> None:
    policy = ScriptedModel(root=[repl("print(1)")])
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv, limits=Limits(max_iterations=3)).run("q", "ctx")
        assert len(srv.requests) == 4
    assert result.stopped_by == "max_iterations" and result.answer == "forced" and result.iterations == 3


def test_total_timeout_stops_the_run_with_a_final_answer() -> None:
    policy = ScriptedModel(root=[repl("import time\nwhile True:\n    time.sleep(0.05)")])
    with ScriptedServer(policy) as srv:
        result = make_rlm(srv, limits=Limits(timeout_s=1.5)).run("q", "ctx")
    assert result.stopped_by == "timeout" and result.answer == "forced"
    assert result.elapsed_s < 5


def test_provider_failure_is_loud_not_an_answer() -> None:
    from rlmx.testing import Fault

    with ScriptedServer(
        ScriptedModel(root=["FINAL(x)"]), faults=lambda req: Fault.status(401, message="bad key")
    ) as srv:
        result = make_rlm(srv).run("q", "ctx")
    assert result.stopped_by == "error" and result.answer is None
    assert result.error is not None and "401" in result.error
    assert any(r["type"] == "error" for r in records(result.trace_path))


def test_trace_records_carry_the_common_fields() -> None:
    with ScriptedServer(tickets_policy) as srv:
        result = make_rlm(srv).run(QUESTION, generate(seed=1, n=500)[0])
    recs = records(result.trace_path)
    ids = {r["id"] for r in recs}
    for rec in recs:
        assert {"type", "schema_version", "id", "parent_id", "depth", "t"} <= set(rec)
        assert rec["parent_id"] is None or rec["parent_id"] in ids
    types = {r["type"] for r in recs}
    assert {"run_start", "lm_call", "exec", "final", "run_end"} <= types
    calls = [r for r in recs if r["type"] == "lm_call"]
    assert sum(r["input_tokens"] for r in calls) == result.usage["input_tokens"]
