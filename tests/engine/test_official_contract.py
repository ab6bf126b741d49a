"""The official RLM contract, end to end: model-style cells through the scripted server and the real
REPL, under the default profile and under `prompt="official"`; the official profile's message shapes;
`max_errors`; the forced final answer in every form."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policies import repl
from rlmx import RLM, Limits, ModelOptions
from rlmx.testing import ScriptedModel, ScriptedServer

CONTEXT = "alpha line\nbeta line with the number 7\ngamma line\n" * 10


def run(
    turns: list[str],
    *,
    prompt: str = "rlmx",
    sub: Any = "sub reply",
    final: str = "FINAL(forced)",
    **limits: Any,
) -> tuple[Any, ScriptedServer]:
    model = ScriptedModel(root=turns, sub=sub, final=final)
    with ScriptedServer(model) as srv:
        rlm = RLM(
            "openai:scripted",
            sub_model="openai:helper",
            model_options=ModelOptions(base_url=srv.url),
            limits=Limits(**{"max_depth": 1, "max_iterations": 6, **limits}),
            prompt=prompt,
            trace=False,
        )
        result = rlm.run("What is the number?", CONTEXT)
    return result, srv


def fed_back(srv: ScriptedServer, turn: int) -> str:
    """The user message(s) the root got after its turn `turn` (1-based): the feedback."""
    roots = [r for r in srv.requests if r.purpose == "root"]
    messages = roots[turn].messages
    last_assistant = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return "\n".join(m["content"] for m in messages[last_assistant + 1 :])


@pytest.mark.parametrize("profile", ["rlmx", "official"])
@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ('answer["content"] = "x"\nanswer["ready"] = True', "x"),
        ('answer = {"content": "r", "ready": True}', "r"),
        ('answer["content"] = [1, 2, 3]\nanswer["ready"] = True', [1, 2, 3]),
    ],
    ids=["item-assignment", "rebind", "json-content"],
)
def test_the_answer_dict_ends_the_run(profile: str, cell: str, expected: Any) -> None:
    result, srv = run([repl(cell), repl("print('never reached')")], prompt=profile)
    assert (
        result.answer == expected and result.answer_source == "answer_dict" and result.stopped_by == "final"
    )
    assert len([r for r in srv.requests if r.purpose == "root"]) == 1


def test_content_without_ready_goes_on_without_error() -> None:
    result, srv = run([repl('answer["content"] = "draft"'), "FINAL(done)"])
    assert result.answer == "done" and result.iterations == 2
    assert "Error" not in fed_back(srv, 1) and "Traceback" not in fed_back(srv, 1)


def test_blocks_after_a_ready_answer_in_the_same_reply_do_not_run() -> None:
    reply = repl('answer["content"] = "first"\nanswer["ready"] = True') + repl("raise SystemError('ran')")
    result, _ = run([reply])
    assert result.answer == "first"


def test_an_answer_set_by_a_block_that_then_raised_is_refused_under_rlmx_and_taken_under_official() -> None:
    cell = repl('answer["content"] = "early"\nanswer["ready"] = True\nraise ValueError("late")')
    result, srv = run([cell, "FINAL(fixed)"])
    assert result.answer == "fixed"
    assert "not accepted because the block that set it raised" in fed_back(srv, 1)
    official, _ = run([cell, "FINAL(fixed)"], prompt="official")
    assert official.answer == "early" and official.answer_source == "answer_dict"


def test_llm_query_with_a_model_of_the_run_uses_it() -> None:
    result, srv = run([repl("r = llm_query('hi', model='scripted')\nprint(r)"), "FINAL(ok)"])
    subs = [r for r in srv.requests if r.purpose == "llm_query"]
    assert result.answer == "ok" and [r.model for r in subs] == ["scripted"]


def test_an_unknown_model_is_served_by_the_sub_model_with_a_note_and_a_batch_completes() -> None:
    code = (
        "r = llm_query('hi', model='gpt-x')\nrs = llm_query_batched(['a', 'b'], model='gpt-x')\nprint(r, rs)"
    )
    result, srv = run([repl(code), "FINAL(ok)"])
    subs = [r for r in srv.requests if r.purpose == "llm_query"]
    assert result.answer == "ok" and len(subs) == 3 and {r.model for r in subs} == {"helper"}
    feedback = fed_back(srv, 1)
    assert "sub reply ['sub reply', 'sub reply']" in feedback
    assert feedback.count("[rlmx] model 'gpt-x' is not in this run; openai:helper answered instead") == 2


def test_rlm_query_takes_the_model_second_and_sends_the_prompt_alone() -> None:
    result, srv = run([repl("print(rlm_query('just the prompt', 'gpt-x'))"), "FINAL(ok)"])
    fallback = [r for r in srv.requests if r.purpose == "fallback"]
    assert result.answer == "ok" and len(fallback) == 1
    assert fallback[0].messages[-1]["content"] == "just the prompt"


def test_text_passed_where_the_model_goes_is_an_error_telling_to_use_context() -> None:
    result, srv = run([repl("rlm_query('summarise', 'a long chunk\\nof text')"), "FINAL(ok)"])
    assert result.answer == "ok"
    assert "pass the text as context=" in fed_back(srv, 1)
    assert not [r for r in srv.requests if r.purpose in ("fallback", "child_root")]


@pytest.mark.parametrize("max_depth", [1, 2])
def test_rlm_query_with_model_at_depth_1_and_2(max_depth: int) -> None:
    turns = [repl("print(rlm_query('child task', model='scripted'))"), "FINAL(ok)"]
    model = ScriptedModel(root=turns, sub="leaf", final="FINAL(forced)", child=["FINAL(child says hi)"])
    with ScriptedServer(model) as srv:
        result = RLM(
            "openai:scripted",
            sub_model="openai:other",
            model_options=ModelOptions(base_url=srv.url),
            limits=Limits(max_depth=max_depth, max_iterations=4),
            trace=False,
        ).run("q", CONTEXT)
    served = [r for r in srv.requests if r.depth == 1]
    assert result.answer == "ok" and served and {r.model for r in served} == {"scripted"}  # not the sub-model
    assert served[0].purpose == ("fallback" if max_depth == 1 else "child_root")


def test_show_vars_returns_a_string_with_the_variables() -> None:
    result, _ = run([repl("x = 3\nlisting = SHOW_VARS()\nassert 'x' in listing\nFINAL_VAR(listing)")])
    assert result.stopped_by == "final" and "x: int" in result.answer


def test_a_reserved_name_is_restored_and_the_model_is_told() -> None:
    turns = [repl('context = "hijacked"'), repl("print(len(context), context[:10])"), "FINAL(ok)"]
    result, srv = run(turns)
    assert result.answer == "ok"
    assert "'context' is reserved and was restored" in fed_back(srv, 1)
    assert f"{len(CONTEXT)} alpha line" in fed_back(srv, 2)


def test_final_var_of_a_missing_name_in_code_goes_back_to_the_model() -> None:
    result, srv = run([repl('FINAL_VAR("missing")'), "FINAL(recovered)"])
    assert result.answer == "recovered" and result.iterations == 2
    assert "no variable named 'missing'" in fed_back(srv, 1)


def test_answer_as_an_ordinary_variable_then_final_var_of_it() -> None:
    result, _ = run([repl("answer = llm_query('say something')\nFINAL_VAR(answer)")], sub="the sub's words")
    assert result.answer == "the sub's words" and result.answer_source == "final_var"


# --- the official profile's message shapes -----------------------------------------------------------


def test_the_official_profile_sends_the_shapes_a_trained_checkpoint_expects() -> None:
    first = repl("x = 41\nlabel = 'n'\nx + 1") + "\n```python\nprint('skipped block')\n```\n"
    result, srv = run(
        [first, repl('answer["content"] = str(x + 1)\nanswer["ready"] = True')], prompt="official"
    )
    assert result.answer == "42" and result.answer_source == "answer_dict"
    roots = [r for r in srv.requests if r.purpose == "root"]
    opening = roots[0].messages
    assert opening[0]["role"] == "system" and 'answer["ready"] = True' in opening[0]["content"]
    assert "FINAL(" not in opening[0]["content"]  # the answer dict is the only ending it teaches
    assert opening[1]["content"].startswith("Answer the following: What is the number?")
    assert "Your context is a str of" in opening[1]["content"]
    assert opening[2]["role"] == "user" and opening[2]["content"].endswith("Turn 1/6:")
    assert "Look at the context first" in opening[2]["content"]
    second = roots[1].messages
    feedback, turn = second[-2]["content"], second[-1]["content"]
    assert feedback.startswith("REPL output:") and "REPL variables: ['x', 'label']" in feedback
    assert "42" not in feedback  # a trailing expression is not echoed
    assert "skipped block" not in feedback and "only ```repl blocks run" in feedback
    assert turn == "Turn 2/6:"


def test_the_default_profile_keeps_its_shapes() -> None:
    result, srv = run([repl("x = 41\nx + 1"), "FINAL(ok)"])
    assert result.answer == "ok"
    roots = [r for r in srv.requests if r.purpose == "root"]
    assert roots[0].messages[1]["content"].endswith("Question: What is the number?")
    assert len(roots[0].messages) == 2
    assert (
        "42" in roots[1].messages[-1]["content"]
        and "model calls left in the run" in roots[1].messages[-1]["content"]
    )


def test_errors_show_as_type_and_message_under_official() -> None:
    result, srv = run(
        [repl("{}['k']"), repl('answer["content"] = "ok"\nanswer["ready"] = True')], prompt="official"
    )
    feedback = [r for r in srv.requests if r.purpose == "root"][1].messages[-2]["content"]
    assert "KeyError: 'k'" in feedback and "Traceback" not in feedback
    assert result.answer == "ok"


def test_the_profile_is_in_the_trace(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    with ScriptedServer(ScriptedModel(root=['answer = {"content": 1, "ready": True}'])) as srv:
        RLM(
            "openai:scripted", model_options=ModelOptions(base_url=srv.url), prompt="official", trace=trace
        ).run("q", "ctx")
    start = json.loads(trace.read_text().splitlines()[0])
    assert start["type"] == "run_start" and start["prompt_profile"] == "official"
    assert start["sampling"] == {"root": {}, "sub": {}}  # nothing set: each role's settings are empty


def test_the_sampling_settings_of_each_role_are_in_the_trace(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    with ScriptedServer(ScriptedModel(root=["FINAL(1)"])) as srv:
        RLM(
            "openai:scripted",
            sub_model="openai:helper",
            model_options=ModelOptions(base_url=srv.url, temperature=0.2),
            sub_model_options=ModelOptions(base_url=srv.url, top_p=0.5),
            trace=trace,
        ).run("q", "ctx")
    start = json.loads(trace.read_text().splitlines()[0])
    assert start["sampling"] == {"root": {"temperature": 0.2}, "sub": {"top_p": 0.5}}


# --- max_errors and the forced final answer ----------------------------------------------------------


def test_max_errors_stops_after_failing_turns_with_a_forced_answer() -> None:
    failing = repl("raise ValueError('nope')")
    result, srv = run([failing], max_errors=3, final="FINAL(gave up)")
    assert result.stopped_by == "max_errors" and result.answer == "gave up" and result.iterations == 3
    assert [r.purpose for r in srv.requests].count("root") == 3


def test_a_turn_without_errors_resets_the_count() -> None:
    failing, fine = repl("raise ValueError('nope')"), repl("print(1)")
    result, _ = run([failing, failing, fine, failing, failing, "FINAL(done)"], max_errors=3)
    assert result.stopped_by == "final" and result.answer == "done"


def test_the_forced_final_answer_may_set_the_answer_dict() -> None:
    forced = repl('answer["content"] = "from the dict"\nanswer["ready"] = True\nllm_query("refused")')
    result, srv = run([repl("print(1)")], max_iterations=1, final=forced, prompt="official")
    assert result.stopped_by == "max_iterations" and result.answer is None  # the cell raised: not taken
    forced_ok = repl('answer["content"] = "from the dict"\nanswer["ready"] = True')
    result, srv = run([repl("print(1)")], max_iterations=1, final=forced_ok, prompt="official")
    assert result.answer == "from the dict" and result.answer_source == "answer_dict"
    assert not [r for r in srv.requests if r.purpose == "llm_query"]


def test_at_a_timeout_a_literal_answer_dict_is_read_without_running_it() -> None:
    import time

    def slow_root(messages: list[dict[str, Any]], request: Any) -> str:
        if request.purpose == "final":
            return repl('answer = {"content": "literal", "ready": True}')
        time.sleep(5)
        return "FINAL(too late)"

    with ScriptedServer(slow_root) as srv:
        result = RLM(
            "openai:scripted",
            model_options=ModelOptions(base_url=srv.url),
            limits=Limits(timeout_s=2),
            trace=False,
        ).run("q", "ctx")
    assert (
        result.stopped_by == "timeout"
        and result.answer == "literal"
        and result.answer_source == "answer_dict"
    )


def test_cli_prompt_and_max_errors(tmp_path: Path) -> None:
    context = tmp_path / "c.txt"
    context.write_text(CONTEXT)
    model = ScriptedModel(root=[repl("raise ValueError('x')")], final="FINAL(stopped)")
    with ScriptedServer(model) as srv:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "rlmx.cli",
                "ask",
                "q",
                "-c",
                str(context),
                "--model",
                "openai:scripted",
                "--base-url",
                srv.url,
                "--max-errors",
                "2",
                "--prompt",
                "official",
                "--json",
                "--no-trace",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 3, proc.stderr
    out = json.loads(proc.stdout)
    assert out["stopped_by"] == "max_errors" and out["answer"] == "stopped"
