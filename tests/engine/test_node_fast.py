"""The engine's behaviour in milliseconds: runs on an in-process scripted model (`ScriptedModel` as a
FunctionLM) with the `local` sandbox, so no HTTP server, no worker process. Each test also checks
what the model was told about every call it served: its purpose, depth and turn.

The same contracts are tested end to end, through HTTP and the isolated worker, in test_engine.py and
the other suites; these sit beneath them and fail first, and fast, when the loop itself breaks.
"""

from __future__ import annotations

from typing import Any

from policies import last_user, repl
from rlmx import RLM, HistorySettings, Limits, RunResult, SandboxSettings
from rlmx.testing import CallInfo, FunctionLM, ScriptedModel

LOCAL = SandboxSettings(backend="local")


def run(model: ScriptedModel, context: Any = "ctx", **kw: Any) -> RunResult:
    output = kw.pop("output", None)
    rlm = RLM(model.lm(), sandbox=LOCAL, trace=False, **kw)
    return rlm.run("q", context, output=output)


def seen(model: ScriptedModel) -> list[tuple[str | None, int | None, int | None]]:
    """(purpose, depth, iteration) of every call the model served, in order."""
    return [(c.purpose, c.depth, c.iteration) for c in model.calls]


# --- finishing ------------------------------------------------------------------------------------------


def test_final_in_prose_ends_the_run_on_its_turn() -> None:
    model = ScriptedModel(root=["I know it without looking.\nFINAL(42)"])
    result = run(model)
    assert (result.answer, result.answer_source, result.stopped_by) == ("42", "final", "final")
    assert result.iterations == 1
    assert seen(model) == [("root", 0, 1)]


def test_final_in_code_ends_the_run_with_the_computed_value() -> None:
    model = ScriptedModel(root=[repl("FINAL(6 * 7)"), "FINAL(never reached)"])
    result = run(model)
    assert (result.answer, result.answer_source, result.stopped_by) == ("42", "final", "final")
    assert seen(model) == [("root", 0, 1)]


def test_final_var_returns_the_variable_itself() -> None:
    model = ScriptedModel(root=[repl("found = {'n': len(context), 'kind': 'chars'}"), "FINAL_VAR(found)"])
    result = run(model, "abcdef")
    assert result.answer == {"n": 6, "kind": "chars"} and result.answer_source == "final_var"
    assert result.stopped_by == "final" and result.iterations == 2
    assert seen(model) == [("root", 0, 1), ("root", 0, 2)]


# --- errors go back to the model ----------------------------------------------------------------------


def test_a_failed_cell_goes_back_to_the_model_and_the_run_goes_on() -> None:
    def second(messages: list[dict[str, Any]], call: CallInfo) -> str:
        told = last_user(messages)
        return "FINAL(saw it)" if "ZeroDivisionError" in told and "cells_ok" not in told else "FINAL(missed)"

    model = ScriptedModel(root=[repl("cells_ok = 1 / 0"), second])
    result = run(model)
    assert result.answer == "saw it" and result.stopped_by == "final"
    assert "ZeroDivisionError" in model.calls[1].prompt and "[turn 1 of" in model.calls[1].prompt
    assert seen(model) == [("root", 0, 1), ("root", 0, 2)]


# --- limits: the forced final answer --------------------------------------------------------------------


def test_max_iterations_forces_a_final_answer_from_final() -> None:
    model = ScriptedModel(root=[repl("print('still looking')")], final="FINAL(best guess)")
    result = run(model, limits=Limits(max_iterations=3))
    assert result.stopped_by == "max_iterations" and result.iterations == 3
    assert (result.answer, result.answer_source) == ("best guess", "final")
    assert seen(model) == [("root", 0, 1), ("root", 0, 2), ("root", 0, 3), ("final", 0, 3)]
    assert "max_iterations" in model.calls[-1].prompt  # the last message asks for the answer, saying why


def test_max_iterations_forced_reply_without_final_gives_its_prose_without_code() -> None:
    prose = "About seven, from what I saw.\n```python\nprint(7)\n```\nThat is my answer."
    model = ScriptedModel(root=[repl("print('still looking')")], final=prose)
    result = run(model, limits=Limits(max_iterations=1))
    assert result.stopped_by == "max_iterations" and result.answer_source == "prose"
    assert result.answer == "About seven, from what I saw.\n\nThat is my answer."
    assert seen(model) == [("root", 0, 1), ("final", 0, 1)]


def test_max_llm_calls_keeps_a_call_for_the_forced_final_answer() -> None:
    model = ScriptedModel(
        root=[
            repl("try:\n    while True:\n        llm_query('more')\nexcept Exception as exc:\n    print(exc)")
        ],
        final="FINAL(out of calls)",
    )
    result = run(model, limits=Limits(max_llm_calls=5))
    assert result.stopped_by == "max_llm_calls" and result.answer == "out of calls"
    # one turn, three sub-calls, and the fifth call kept back for the answer: turn 2 is refused it
    assert seen(model) == [("root", 0, 1), *[("llm_query", 1, None)] * 3, ("final", 0, 2)]
    assert "max_llm_calls" in model.calls[-1].prompt


# --- sub-calls, answered per purpose ----------------------------------------------------------------------


def test_llm_query_and_llm_query_batched_are_sub_calls_one_level_down() -> None:
    model = ScriptedModel(
        root=[repl("out = [llm_query('one')] + llm_query_batched(['two', 'three'])"), "FINAL_VAR(out)"],
        sub=lambda prompt: prompt.upper(),
    )
    result = run(model)
    assert result.answer == ["ONE", "TWO", "THREE"]  # the batch keeps its order
    assert seen(model)[0] == ("root", 0, 1) and seen(model)[-1] == ("root", 0, 2)
    subs = model.calls[1:-1]
    assert sorted(c.prompt for c in subs) == ["one", "three", "two"]
    assert {(c.purpose, c.depth, c.iteration) for c in subs} == {("llm_query", 1, None)}


def test_rlm_query_at_the_depth_limit_is_a_fallback_call() -> None:
    model = ScriptedModel(root=[repl("r = rlm_query('summarise', context='some text')"), "FINAL_VAR(r)"])
    result = run(model, limits=Limits(max_depth=1))
    assert result.answer == "sub-answer"
    assert seen(model) == [("root", 0, 1), ("fallback", 1, None), ("root", 0, 2)]
    assert "summarise" in model.calls[1].prompt and "some text" in model.calls[1].prompt


def test_rlm_query_with_max_depth_2_runs_a_child_rlm_whose_calls_are_depth_1() -> None:
    model = ScriptedModel(
        root=[repl("r = rlm_query('how long is it?', context='abcde')"), "FINAL_VAR(r)"],
        child=[repl("n = len(context)\nnote = llm_query('a note')\nd = rlm_query('deeper')"), "FINAL_VAR(n)"],
        sub="leaf",
    )
    result = run(model, "the root context", limits=Limits(max_depth=2))
    assert result.answer == "5" and result.stopped_by == "final"
    assert seen(model) == [
        ("root", 0, 1),
        ("child_root", 1, 1),
        ("llm_query", 2, None),  # the child's own sub-call, one level below it
        ("fallback", 2, None),  # depth 1 + 1 == max_depth: the child's rlm_query is a plain call
        ("child_root", 1, 2),
        ("root", 0, 2),
    ]
    assert "how long is it?" in model.calls[1].prompt  # the child is asked the question it was given


def test_a_child_that_hits_its_turn_limit_gives_its_forced_final_answer_at_its_depth() -> None:
    model = ScriptedModel(
        root=[repl("r = rlm_query('dig')"), "FINAL_VAR(r)"],
        child=[repl("print('digging')")],
        final="FINAL(partial)",
    )
    result = run(model, limits=Limits(max_depth=2, max_iterations=2))
    assert result.answer == "partial" and result.stopped_by == "final"
    assert seen(model) == [
        ("root", 0, 1),
        ("child_root", 1, 1),
        ("child_root", 1, 2),
        ("final", 1, 2),
        ("root", 0, 2),
    ]


# --- typed answers and long runs ---------------------------------------------------------------------------


def test_a_rejected_typed_answer_gets_a_correction_turn() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    model = ScriptedModel(root=["FINAL(seven)", 'FINAL({"n": 7})'])
    result = run(model, output=schema)
    assert result.stopped_by == "final" and result.answer == {"n": 7}
    assert seen(model) == [("root", 0, 1), ("correction", 0, 2)]
    assert "not accepted" in model.calls[1].prompt


def test_history_compaction_is_a_call_of_its_own() -> None:
    model = ScriptedModel(
        root=[repl(f"print('{i}' * 3000)") for i in range(4)] + ["FINAL(done)"],
        compaction="summary: four long prints",
    )
    settings = HistorySettings(context_window=3000, compact_at=0.6, keep_recent_turns=1)
    result = run(model, history=settings)
    assert result.answer == "done"
    compactions = [c for c in model.calls if c.purpose == "compaction"]
    assert compactions and all(c.depth == 0 and c.iteration is not None for c in compactions)
    turns = [c.iteration for c in model.calls if c.purpose == "root"]
    assert turns == [1, 2, 3, 4, 5]  # compaction calls do not count as turns
    last_turn = next(c for c in reversed(model.calls) if c.purpose == "root")
    assert last_turn.reply == "FINAL(done)"


# --- the FunctionLM seam itself ----------------------------------------------------------------------------


def test_function_lm_passes_the_call_settings_and_records_them() -> None:
    def fn(messages: list[dict[str, Any]], settings: Any) -> str:
        if settings.purpose == "llm_query":
            return f"depth {settings.depth}"
        return repl("x = llm_query('where am I?')") if settings.iteration == 1 else "FINAL_VAR(x)"

    lm = FunctionLM(fn)
    result = RLM(lm, sandbox=LOCAL, trace=False).run("q", "ctx")
    assert result.answer == "depth 1"
    assert [(s.purpose, s.depth, s.iteration) for s in lm.call_settings] == [
        ("root", 0, 1),
        ("llm_query", 1, None),
        ("root", 0, 2),
    ]
    assert len(lm.calls) == len(lm.call_settings) == 3
