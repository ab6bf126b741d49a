"""`rlmx.compat.rlms.RLM.completion` end to end over a scripted server: what it returns, what the model
is sent, and the strict official contract (only the `answer` dict ends a run)."""

from __future__ import annotations

import pytest
from rlms_support import compat, ready, repl, roots, shape

from rlmx.compat.rlms import RLM, RLMLogger
from rlmx.compat.rlms.core.types import RLMChatCompletion
from rlmx.testing import ScriptedModel

CONTEXT = "alpha line\nbeta line with the number 7\ngamma line\n" * 5


def test_a_completion_answers_with_the_answer_dict_and_reports_usage_by_model() -> None:
    model = ScriptedModel(root=[repl("n = llm_query('count?')\nprint(n)"), ready("'7'")], sub="seven")
    with compat(model) as (rlm, srv):
        out = rlm.completion(CONTEXT, root_prompt="What is the number?")
    assert isinstance(out, RLMChatCompletion)
    assert out.response == "7" and out.root_model == "gpt-test" and out.prompt == CONTEXT
    usage = out.usage_summary.model_usage_summaries["gpt-test"]
    assert usage.total_calls == 3 and usage.total_input_tokens > 0 and usage.total_output_tokens > 0
    assert out.metadata is None and out.error is None and out.execution_time > 0
    first = shape(roots(srv)[0])
    assert [role for role, _ in first] == ["system", "user", "user"]
    assert first[1][1] == "Answer the following: What is the number?"
    assert first[2][1].startswith("You have not looked at the context")
    second = shape(roots(srv)[1])
    assert [line for _, line in second[3:]] == ["```repl", "REPL output:", "Turn 2/30:"]


def test_without_root_prompt_the_prompt_is_the_context_and_there_is_no_question() -> None:
    model = ScriptedModel(root=[ready("context[:5]")])
    with compat(model) as (rlm, srv):
        out = rlm.completion("Sum these numbers: 1 2 3")
    assert out.response == "Sum t"
    opening = roots(srv)[0].messages[1]["content"]
    assert "Answer the following" not in opening and "Question" not in opening
    assert opening.startswith("Your context is a str")


def test_final_text_and_final_in_code_do_not_end_the_run() -> None:
    model = ScriptedModel(root=["FINAL(too early)", repl("FINAL('also not')"), ready("'done'")])
    with compat(model) as (rlm, srv):
        out = rlm.completion(CONTEXT, root_prompt="q")
    assert out.response == "done" and len(roots(srv)) == 3
    second = [m["role"] for m in roots(srv)[1].messages]
    assert second[-2:] == ["assistant", "user"]  # no feedback after a reply without code, then Turn 2
    assert "NameError: name 'FINAL' is not defined" in roots(srv)[2].messages[-2]["content"]


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ('answer["content"] = [1, 2, 3]\nanswer["ready"] = True', "[1, 2, 3]"),
        ('answer = {"content": 41 + 1, "ready": True}', "42"),
    ],
    ids=["non-string", "rebound"],
)
def test_the_answer_is_the_content_as_a_string(cell: str, expected: str) -> None:
    with compat(ScriptedModel(root=[repl(cell)])) as (rlm, _):
        assert rlm.completion(CONTEXT).response == expected


def test_out_of_iterations_the_final_call_is_an_assistant_message_and_its_reply_is_the_answer() -> None:
    model = ScriptedModel(root=[repl("print(1)")], final="The number is 7.\n```repl\nprint(2)\n```")
    with compat(model, max_iterations=2) as (rlm, srv):
        out = rlm.completion(CONTEXT, root_prompt="q")
    assert out.response == "The number is 7.\n```repl\nprint(2)\n```"
    final = [r for r in srv.requests if r.purpose == "final"]
    assert len(final) == 1 and final[0].messages[-1]["role"] == "assistant"
    assert len(roots(srv)) == 3


def test_dict_and_message_list_contexts_reach_the_repl_as_values() -> None:
    model = ScriptedModel(root=[ready("type(context).__name__ + str(len(context))")])
    with compat(model) as (rlm, _):
        assert rlm.completion({"a": "x", "b": "y"}).response == "dict2"
        messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
        assert rlm.completion(messages).response == "list2"


def test_the_logger_keeps_the_trajectory_in_memory_and_in_the_official_jsonl_shape(tmp_path) -> None:
    import json

    model = ScriptedModel(root=[repl("print('seen')"), ready("'ok'")])
    logger = RLMLogger(log_dir=str(tmp_path / "logs"), file_name="run")
    with compat(model, logger=logger) as (rlm, _):
        out = rlm.completion(CONTEXT, root_prompt="q")
    trajectory = out.metadata
    assert trajectory is not None and set(trajectory) == {"run_metadata", "iterations"}
    assert trajectory["run_metadata"]["root_model"] == "gpt-test"
    assert "api_key" not in trajectory["run_metadata"]["backend_kwargs"]
    first, last = trajectory["iterations"]
    assert set(first) == {
        "type",
        "iteration",
        "timestamp",
        "prompt",
        "response",
        "code_blocks",
        "final_answer",
        "iteration_time",
    }
    assert first["code_blocks"][0]["result"]["stdout"].strip() == "seen"
    assert first["final_answer"] is None and last["final_answer"] == "ok"
    assert [m["role"] for m in last["prompt"]][-3:] == ["assistant", "user", "user"]
    files = list((tmp_path / "logs").glob("run_*.jsonl"))
    assert len(files) == 1
    records = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert [r["type"] for r in records] == ["metadata", "iteration", "iteration"]


def test_a_block_error_is_shown_as_the_official_shows_it_and_the_run_recovers() -> None:
    model = ScriptedModel(root=[repl("{}['missing']"), ready("'recovered'")])
    with compat(model) as (rlm, srv):
        out = rlm.completion(CONTEXT)
    assert out.response == "recovered"
    assert "KeyError: 'missing'" in roots(srv)[1].messages[-2]["content"]


def test_setup_code_runs_in_the_repl_before_the_first_turn() -> None:
    model = ScriptedModel(root=[ready("str(PRESET * 2)")])
    with compat(model, environment_kwargs={"setup_code": "PRESET = 21"}) as (rlm, srv):
        assert rlm.completion(CONTEXT).response == "42"
    assert len(roots(srv)) == 1


def test_persistent_keeps_one_repl_across_completions() -> None:
    turns = iter(
        [
            repl("kept = 5") + "\n" + ready("'first'"),
            ready("'/'.join([str(kept), context_1, context, str(len(history))])"),
        ]
    )
    with compat(lambda messages, call: next(turns), persistent=True) as (rlm, srv):
        first = rlm.completion("first context")
        second = rlm.completion("second context")
    assert first.response == "first" and second.response == "5/second context/first context/3"
    opening, turn = roots(srv)[1].messages[1]["content"], roots(srv)[1].messages[2]["content"]
    assert opening.startswith("Your context is a str of 14 characters")  # this call's prompt
    assert "session" not in opening
    assert turn.endswith(
        "Turn 1/30:\n\nNote: the REPL holds 2 contexts, context_0 to context_1."
        "\n\nNote: the REPL holds 1 earlier conversation's messages, in the `history` variable."
    )
    # `history` is the first call's messages as its last turn was sent (system, opening, Turn 1)


def test_the_context_manager_closes_and_close_is_harmless_twice() -> None:
    rlm = RLM(backend_kwargs={"model_name": "m"})
    with rlm as same:
        assert same is rlm
    rlm.close()


def test_a_user_prologue_is_a_user_message_after_the_opening() -> None:
    with compat(ScriptedModel(root=[ready("'x'")]), user_prologue="Tip: count lines.") as (rlm, srv):
        rlm.completion(CONTEXT, root_prompt="q")
    messages = roots(srv)[0].messages
    assert [m["role"] for m in messages] == ["system", "user", "user", "user"]
    assert messages[2]["content"] == "Tip: count lines."


def test_custom_system_prompt_is_formatted_and_orchestrator_adds_the_delegation_paragraph() -> None:
    tools = {"lookup": {"tool": lambda key: key.upper(), "description": "Upper-cases a key"}}
    prompt = "Be brief.{custom_tools_section}"
    with compat(
        ScriptedModel(root=[ready("lookup('k')")]),
        custom_system_prompt=prompt,
        custom_tools=tools,
        orchestrator=False,
    ) as (rlm, srv):
        assert rlm.completion(CONTEXT).response == "K"
    system = roots(srv)[0].messages[0]["content"]
    assert system.startswith("Be brief.") and "lookup" in system and "Work in steps" not in system
    with compat(ScriptedModel(root=[ready("'x'")]), custom_system_prompt="Short.") as (rlm, srv):
        rlm.completion(CONTEXT)
    assert "Work in steps" in roots(srv)[0].messages[0]["content"]


def test_the_quickstart_pattern_runs_with_only_its_imports_changed(tmp_path, monkeypatch, capsys) -> None:
    """The official quickstart's shape: key and endpoint from the environment, the docker environment,
    a logger writing to a folder, verbose output, a completion without root_prompt, the result printed."""
    from rlmx.testing import ScriptedServer

    model = ScriptedModel(root=[repl("print(context)"), ready("'1\\n2\\n4\\n8\\n16'")])
    with ScriptedServer(model) as srv:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fake")
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
        logger = RLMLogger(log_dir=str(tmp_path / "logs"))
        rlm = RLM(
            backend="openai",
            backend_kwargs={"model_name": "gpt-5-nano", "api_key": "sk-test-fake"},
            environment="docker",
            environment_kwargs={},
            max_depth=1,
            logger=logger,
            verbose=True,
        )
        result = rlm.completion("Print me the first 5 powers of two, each on a newline.")
        print(result)
    assert result.response == "1\n2\n4\n8\n16"
    captured = capsys.readouterr()
    assert "RLMChatCompletion(root_model='gpt-5-nano'" in captured.out
    assert "[rlm] final answer: 1" in captured.err and "[rlm] iteration 1: ```repl" in captured.err
    assert len(list((tmp_path / "logs").glob("rlm_*.jsonl"))) == 1


def test_compaction_summarises_the_whole_history_as_officially() -> None:
    shape = "[type(e).__name__ for e in history] + [history[-1]['type'], history[0][0]['role']]"
    model = ScriptedModel(
        root=[repl("print('x' * 9000)"), ready(f"str({shape})")], compaction="SUMMARY OF WORK"
    )
    with compat(model, compaction=True, compaction_threshold_pct=0.01) as (rlm, srv):
        out = rlm.completion(CONTEXT, root_prompt="q")
    assert out.response == "['list', 'dict', 'summary', 'assistant']"  # the official `history` entries
    compaction = [r for r in srv.requests if r.purpose == "compaction"]
    assert len(compaction) == 1
    assert [m["role"] for m in compaction[0].messages] == [
        "system",
        "user",
        "user",
        "assistant",
        "user",
        "user",
    ]
    after = roots(srv)[1].messages
    assert [m["role"] for m in after] == ["system", "user", "assistant", "user", "user"]
    assert after[2]["content"] == "SUMMARY OF WORK" and after[4]["content"] == "Turn 2/30:"


def test_without_compaction_a_long_history_is_sent_whole() -> None:
    model = ScriptedModel(root=[repl("print('x' * 9000)"), ready("'after'")])
    with compat(model, compaction_threshold_pct=0.01) as (rlm, srv):
        rlm.completion(CONTEXT, root_prompt="q")
    assert not [r for r in srv.requests if r.purpose == "compaction"]


def test_any_positive_compaction_threshold_is_accepted_and_zero_is_refused_by_name() -> None:
    model = ScriptedModel(root=[repl("print(1)"), ready("'x'")])
    with compat(model, compaction=True, compaction_threshold_pct=0.0001) as (rlm, srv):
        assert rlm.completion(CONTEXT).response == "x"
    assert [r.purpose for r in srv.requests] == ["compaction", "root", "compaction", "root"]
    with pytest.raises(ValueError, match="compaction_threshold_pct must be a number > 0"):
        RLM(compaction=True, compaction_threshold_pct=0)


def test_the_feedback_lists_the_variables_as_the_official_repl_does() -> None:
    model = ScriptedModel(root=[repl("n = 1\nf = lambda: 2"), repl("print(context_0[:5])"), ready("'x'")])
    with compat(model, custom_tools={"LIMIT": 3, "tool": lambda: 1}) as (rlm, srv):
        rlm.completion(CONTEXT)
    first, second = roots(srv)[1].messages[-2]["content"], roots(srv)[2].messages[-2]["content"]
    assert first == "REPL output:\nREPL variables: ['answer', 'LIMIT', 'context_0', 'context', 'n']\n"
    assert second.startswith("REPL output:\n\nalpha") and second.endswith(
        "REPL variables: ['answer', 'LIMIT', 'context_0', 'context', 'n']\n"
    )


def test_a_dict_or_list_context_is_sized_as_the_official_counts_it() -> None:
    with compat(ScriptedModel(root=[ready("'x'")]), persistent=True) as (rlm, srv):
        rlm.completion({"doc1": "hello", "doc2": [1, 2]})
        rlm.completion([{"role": "user", "content": "hi there"}, {"role": "assistant", "content": "yo"}])
    first, second = (r.messages[1]["content"] for r in roots(srv))
    assert first.startswith("Your context is a dict of 11 total characters; with 2 keys")
    assert second.startswith("Your context is a list of 10 total characters; of 2 items")


def test_completion_works_where_an_event_loop_runs_as_in_a_notebook() -> None:
    import asyncio

    async def notebook_cell() -> tuple[str, str]:
        turns = iter([ready("'one'"), ready("'two'")])
        with compat(lambda messages, call: next(turns), persistent=True) as (rlm, _):
            return rlm.completion(CONTEXT).response, rlm.completion(CONTEXT).response

    assert asyncio.run(notebook_cell()) == ("one", "two")


def test_attributes_changed_between_completions_take_effect() -> None:
    model = ScriptedModel(root=[repl("print(1)")], final="out of turns")
    with compat(model, max_iterations=1) as (rlm, srv):
        rlm.completion(CONTEXT)
        rlm.max_iterations = 2
        rlm.completion(CONTEXT)
    assert [r.purpose for r in srv.requests] == ["root", "final", "root", "root", "final"]


def test_each_block_of_the_feedback_is_cut_as_officially_and_the_whole_output_is_logged() -> None:
    logger = RLMLogger()
    with compat(ScriptedModel(root=[repl("print('x' * 30000)"), ready("'x'")]), logger=logger) as (rlm, srv):
        out = rlm.completion(CONTEXT)
    feedback = roots(srv)[1].messages[-2]["content"]
    body = "\n" + "x" * 30000 + "\n\n\nREPL variables: ['answer', 'context_0', 'context']\n"
    assert feedback == "REPL output:\n" + body[:20000] + f"... + [{len(body) - 20000} chars...]"
    assert out.metadata is not None
    assert out.metadata["iterations"][0]["code_blocks"][0]["result"]["stdout"] == "x" * 30000 + "\n"


def test_the_blocks_after_the_answer_run_and_the_first_answer_counts() -> None:
    reply = (
        ready("'first'")
        + "\n"
        + repl("print('second ran')\nanswer['content'] = 'second'\nanswer['ready'] = True")
    )
    logger = RLMLogger()
    with compat(ScriptedModel(root=[reply]), logger=logger) as (rlm, _):
        out = rlm.completion(CONTEXT)
    assert out.response == "first"
    blocks = out.metadata["iterations"][0]["code_blocks"]
    assert [b["result"]["stdout"] for b in blocks] == ["", "second ran\n"]
    assert [b["result"]["final_answer"] for b in blocks] == ["first", None]


def test_show_vars_lists_as_the_official_repl_does() -> None:
    model = ScriptedModel(root=[repl("import re\nx = 1\nwords = ['a']"), ready("SHOW_VARS()")])
    with compat(model, custom_tools={"LIMIT": 3, "tool": lambda: 1}) as (rlm, _):
        out = rlm.completion(CONTEXT)
    assert out.response == (
        "Available variables: {'LIMIT': 'int', 'context_0': 'str', 'context': 'str', 're': 'module', "
        "'x': 'int', 'words': 'list'}"
    )


def test_a_none_or_empty_answer_is_its_string_as_officially() -> None:
    with compat(ScriptedModel(root=[ready("None")])) as (rlm, _):
        assert rlm.completion(CONTEXT).response == "None"
    with compat(ScriptedModel(root=[repl("answer['ready'] = True")])) as (rlm, _):
        assert rlm.completion(CONTEXT).response == ""
