"""What rlmx's own API gained for the compat layer: a run with a context and no question, setup code
before the first turn (a run's and a session's), and its dialects left as they were."""

from __future__ import annotations

import asyncio
from typing import Any

from rlms_support import KEY, ready, repl

from rlmx import RLM, Limits, ModelOptions
from rlmx.testing import ScriptedModel, ScriptedServer


def engine(srv: ScriptedServer, **fields: Any) -> RLM:
    return RLM("openai:m", model_options=ModelOptions(base_url=srv.url, api_key=KEY), trace=False, **fields)


def test_a_session_question_without_a_question_and_setup_code_before_its_first_turn() -> None:
    model = ScriptedModel(root=[repl("print(SEEN)"), "FINAL(done)"])
    with ScriptedServer(model) as srv, engine(srv).session() as session:
        first = session.ask(None, "Count the words: a b c", setup_code="SEEN = 'set up'")
        second = session.ask("again?")
    assert first.answer == "done" and second.answer == "done"
    roots = [r for r in srv.requests if r.purpose == "root"]
    assert "set up" in roots[1].messages[-1]["content"]  # the setup code's name was there at turn 1
    assert "No separate question was given" in roots[0].messages[1]["content"]
    assert "Question: again?" in roots[2].messages[1]["content"]


def test_arun_runs_setup_code_once_before_the_first_turn_and_its_output_is_unseen() -> None:
    model = ScriptedModel(root=[ready("str(N)")])
    with ScriptedServer(model) as srv:
        rlm = engine(srv, prompt="official")
        result = asyncio.run(rlm.arun(None, "ctx", setup_code="N = 6 * 7\nprint('hidden')"))
    assert result.answer == "42" and result.cells == 2
    assert all("hidden" not in m["content"] for r in srv.requests for m in r.messages)


def test_the_default_profile_still_honours_final_and_stops_at_the_ledger() -> None:
    model = ScriptedModel(root=["FINAL(fast)"])
    with ScriptedServer(model) as srv:
        result = engine(srv, limits=Limits(max_iterations=3)).run("q?", "ctx")
    assert result.answer == "fast" and result.stopped_by == "final"
