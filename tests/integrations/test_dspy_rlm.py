"""`dspy.RLM` (and `dspy.Flex`, where the release has it) on rlmx.integrations.dspy.Interpreter, end to
end with DSPy's DummyLM: tools, typed outputs, recovery from errors, the async path, the factory forms DSPy
accepts, and sub-agents built in the REPL. Run again per release by test_dspy_releases.py."""

from __future__ import annotations

import asyncio
import importlib.util
import os
from typing import Any

import pytest
from dspy_support import dspy_or_skip

dspy_or_skip()

import dspy  # noqa: E402
from dspy.utils.dummies import DummyLM  # noqa: E402

from rlmx import SandboxSettings  # noqa: E402
from rlmx.integrations.dspy import Interpreter, interpreter_factory  # noqa: E402

FACADE = importlib.util.find_spec("dspy.primitives.facade") is not None  # 3.4: sub-agents in the REPL
CONFIGURABLE = "interpreter_factory" in dspy.settings.config  # 3.4: dspy.configure(interpreter_factory=)


def actions(*codes: str) -> list[dict[str, str]]:
    """DummyLM answers for RLM's action predictor: one per REPL step."""
    return [{"reasoning": f"step {i}", "code": f"```python\n{code}\n```"} for i, code in enumerate(codes)]


async def fetch(key: str) -> dict[str, str]:
    await asyncio.sleep(0.01)
    return {"key": key, "value": key[::-1]}


def lookup(key: str, times: int = 1) -> list[str]:
    """Look a key up."""
    return [key.upper()] * times


def test_rlm_runs_on_it_with_tools_and_coerces_typed_outputs() -> None:
    lm = DummyLM(
        actions(
            "print(len(report), report[:5])\nfound = lookup('ab', times=2) + lookup('c')\nprint(found)",
            "SUBMIT(summary=' '.join(found), count=str(len(found)), ratio='0.5', tags=found, ok='true')",
        )
    )
    rlm = dspy.RLM(
        "report -> summary: str, count: int, ratio: float, tags: list[str], ok: bool",
        interpreter_factory=Interpreter,
        tools=[lookup],
        max_iters=3,
    )
    with dspy.context(lm=lm):
        result = rlm(report="hello world")
    assert result.summary == "AB AB C"
    assert (result.count, result.ratio, result.tags, result.ok) == (3, 0.5, ["AB", "AB", "C"], True)
    assert result.trajectory[0]["output"] == "11 hello\n['AB', 'AB', 'C']\n"
    assert Interpreter.execution_instructions in rlm.generate_action.signature.instructions


def test_rlm_feeds_errors_back_and_the_next_step_recovers() -> None:
    lm = DummyLM(actions("x = undefined_name", "x = 41 +", "x = 41\nSUBMIT(answer=x + 1)"))
    rlm = dspy.RLM("question -> answer: int", interpreter_factory=Interpreter, max_iters=4)
    with dspy.context(lm=lm):
        result = rlm(question="?")
    assert result.answer == 42
    first, second = result.trajectory[0]["output"], result.trajectory[1]["output"]
    assert first.startswith("[Error]") and "NameError" in first
    assert second.startswith("[Error]") and "Invalid Python syntax" in second


def test_rlm_async_path_with_a_coroutine_tool() -> None:
    lm = DummyLM(actions("got = fetch(key='xyz')\nprint(got)", "SUBMIT(answer=got['value'])"))
    rlm = dspy.RLM("question -> answer", interpreter_factory=Interpreter, tools=[fetch], max_iters=3)

    async def main() -> Any:
        with dspy.context(lm=lm):
            return await rlm.acall(question="?")

    result = asyncio.run(main())  # execute() is called inside the running loop, and must not block it
    assert result.answer == "zyx"
    assert "'value': 'zyx'" in result.trajectory[0]["output"]


def test_the_factory_forms_dspy_accepts() -> None:
    made: list[Interpreter] = []
    factory = interpreter_factory(SandboxSettings(output_chars=50_000))

    def counting() -> Interpreter:
        made.append(factory())
        return made[-1]

    counting.execution_instructions = Interpreter.execution_instructions  # type: ignore[attr-defined]
    rlm = dspy.RLM("question -> answer", interpreter_factory=counting, max_iters=2)
    with dspy.context(lm=DummyLM(actions("SUBMIT(answer='a')"))):
        assert rlm(question="?").answer == "a"
    assert len(made) == 1 and made[0].sandbox_settings.output_chars == 50_000
    assert made[0]._ended  # dspy.RLM shuts down what its factory made
    with pytest.raises(TypeError):
        dspy.RLM("question -> answer", interpreter_factory=Interpreter())  # an instance: refused by DSPy
    with pytest.raises(ValueError, match="execution_timeout must be > 0"):
        interpreter_factory(execution_timeout=0)  # checked when the factory is made, not per call


# What differs between releases is tested where the release has it (a test, not a skipped one, elsewhere).
if CONFIGURABLE:

    def test_dspy_context_interpreter_factory_selects_it() -> None:
        rlm = dspy.RLM("question -> answer", max_iters=2)
        lm = DummyLM(actions("import sys\nSUBMIT(answer=sys.implementation.name)"))
        with dspy.context(lm=lm, interpreter_factory=Interpreter):
            assert rlm(question="?").answer == "cpython"


def test_a_caller_owned_interpreter_keeps_its_state_across_calls() -> None:
    if CONFIGURABLE:  # 3.4 takes none: its RLM makes and shuts down each interpreter itself
        with pytest.raises(TypeError):
            dspy.RLM("question -> answer")(Interpreter(), question="?")
        return
    rlm = dspy.RLM("question -> answer: int", max_iters=2)
    owned = Interpreter()
    try:
        steps = actions("calls = globals().get('calls', 0) + 1\nSUBMIT(answer=calls)")
        with dspy.context(lm=DummyLM(steps + steps)):
            assert rlm(owned, question="?").answer == 1
            assert rlm(owned, question="?").answer == 2
        assert not owned._ended  # the caller's: RLM does not shut it down
    finally:
        owned.shutdown()


def test_sub_agents_built_in_the_repl_run_on_the_host_and_nest_on_the_same_factory() -> None:
    if not FACADE:  # 3.3: no sub-agents; DSPy puts no `dspy` into the REPL (a venv's own may import)
        with Interpreter() as interpreter:
            assert interpreter.execute("'dspy' in globals()") is False
        return
    made: list[Interpreter] = []

    def counting() -> Interpreter:
        made.append(Interpreter())
        return made[-1]

    lm = DummyLM(
        [
            actions(
                "import dspy\nres = dspy.Predict('question -> answer')(question='ping')\nprint(res.answer)"
            )[0],
            {"answer": "pong"},
            actions("nested = dspy.RLM('q -> a', max_iters=2)\nout = nested(q='hi')\nprint(out.a)")[0],
            actions("import sys\nSUBMIT(a=q + '!' + sys.implementation.name)")[0],  # the nested RLM's step
            actions("SUBMIT(answer=res.answer + ' ' + out.a)")[0],
        ]
    )
    rlm = dspy.RLM("question -> answer", interpreter_factory=counting, max_iters=4)
    with dspy.context(lm=lm):
        result = rlm(question="?")
    assert result.answer == "pong hi!cpython"
    assert len(made) == 2 and all(i._ended for i in made)  # the nested RLM got its own, from the factory


if hasattr(dspy, "Flex"):  # 3.4: a module whose forward() is code, run in the interpreter

    def test_flex_runs_its_module_code_in_the_worker_with_predictors_on_the_host() -> None:
        class Count(dspy.Signature):
            text: str = dspy.InputField()
            words: int = dspy.OutputField()

        module = (
            "class Counter(dspy.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.guess = dspy.Predict('text: str -> words: int')\n"
            "\n"
            "    def forward(self, **inputs):\n"
            "        import os\n"
            "        counted = len(inputs['text'].split()) * (1 if os.getpid() != HOST_PID else 1000)\n"
            "        return dspy.Prediction(words=counted * 10 + self.guess(text=inputs['text']).words)\n"
        ).replace("HOST_PID", str(os.getpid()))
        program = dspy.Flex(Count, interpreter_factory=Interpreter)
        program._bind_code(module)
        with dspy.context(lm=DummyLM([{"words": 3}])):
            assert program(text="a b c").words == 33  # counted in the worker (another process), guessed here
