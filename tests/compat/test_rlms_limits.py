"""The official limits under `rlmx.compat.rlms`: checked between turns, raising the official exceptions
with their fields; and rlmx's own API, which keeps its `stopped_by` contract instead of raising."""

from __future__ import annotations

import time
from typing import Any

import pytest
from rlms_support import compat, ready, repl, roots

from rlmx import RLM as RlmxRLM
from rlmx import ModelOptions
from rlmx.compat.rlms import (
    BudgetExceededError,
    ErrorThresholdExceededError,
    TimeoutExceededError,
    TokenLimitExceededError,
)
from rlmx.testing import Reply, ScriptedModel, ScriptedServer

CONTEXT = "some lines of context\n" * 20


def test_max_errors_raises_after_that_many_failing_turns_in_a_row() -> None:
    model = ScriptedModel(root=["first look", repl("1/0"), repl("undefined_name")])
    with compat(model, max_errors=2) as (rlm, srv):
        with pytest.raises(ErrorThresholdExceededError) as caught:
            rlm.completion(CONTEXT, root_prompt="q")
    error = caught.value
    assert error.error_count == 2 and error.threshold == 2
    assert error.last_error == "\nNameError: name 'undefined_name' is not defined"
    assert error.partial_answer == repl("1/0")  # the reply before the turn that passed the limit
    assert len(roots(srv)) == 3 and not [r for r in srv.requests if r.purpose == "final"]


def test_an_error_then_a_success_resets_the_count() -> None:
    model = ScriptedModel(root=[repl("1/0"), repl("print(1)"), repl("1/0"), ready("'fine'")])
    with compat(model, max_errors=2) as (rlm, _):
        assert rlm.completion(CONTEXT).response == "fine"


def test_max_tokens_raises_with_the_tokens_used_and_is_checked_before_the_answer() -> None:
    def policy(messages: list[dict[str, Any]], call: Any) -> Reply:
        turn = sum(m["role"] == "assistant" for m in messages) + 1
        return Reply(repl("print(1)") if turn == 1 else ready("'late'"), input_tokens=600, output_tokens=10)

    with compat(policy, max_tokens=1000) as (rlm, srv):
        with pytest.raises(TokenLimitExceededError) as caught:
            rlm.completion(CONTEXT, root_prompt="q")
    assert caught.value.tokens_used == 1220 and caught.value.token_limit == 1000
    assert caught.value.partial_answer == repl("print(1)")
    assert len(roots(srv)) == 2
    assert "after iteration 2" in str(caught.value)


def test_max_budget_counts_the_cost_the_provider_reports() -> None:
    def policy(messages: list[dict[str, Any]], call: Any) -> Reply:
        return Reply(repl("print(1)"), cost=0.004)

    with compat(policy, max_budget=0.01) as (rlm, srv):
        with pytest.raises(BudgetExceededError) as caught:
            rlm.completion(CONTEXT)
    assert caught.value.budget == 0.01 and caught.value.spent == pytest.approx(0.012)
    assert len(roots(srv)) == 3


def test_unreported_cost_never_passes_the_budget() -> None:
    with compat(ScriptedModel(root=[repl("print(1)"), ready("'free'")]), max_budget=1e-9) as (rlm, _):
        out = rlm.completion(CONTEXT)
    assert out.response == "free" and out.usage_summary.total_cost is None


def test_max_timeout_is_checked_before_each_turn() -> None:
    def slow(messages: list[dict[str, Any]], call: Any) -> str:
        time.sleep(0.4)
        return repl("print('working')")

    with compat(slow, max_timeout=0.6) as (rlm, srv):
        with pytest.raises(TimeoutExceededError) as caught:
            rlm.completion(CONTEXT)
    error = caught.value
    assert error.timeout == 0.6 and error.elapsed > 0.6
    assert error.partial_answer == repl("print('working')")
    assert len(roots(srv)) == 2  # the second turn ran to its end; the third never started


def test_the_exceptions_are_the_official_names_at_the_package_root() -> None:
    import rlmx.compat.rlms as rlm_package
    from rlmx.compat.rlms.utils import exceptions

    for name in (
        "BudgetExceededError",
        "TimeoutExceededError",
        "TokenLimitExceededError",
        "ErrorThresholdExceededError",
        "CancellationError",
    ):
        assert getattr(rlm_package, name) is getattr(exceptions, name)
        assert issubclass(getattr(exceptions, name), Exception)


def test_rlmx_own_api_keeps_stopped_by_and_runs_without_a_question() -> None:
    model = ScriptedModel(root=[repl("print(1/0)")] * 3, final="FINAL(best effort)")
    with ScriptedServer(model) as srv:
        rlm = RlmxRLM(
            "openai:m", model_options=ModelOptions(base_url=srv.url, api_key="sk-test-fake"), trace=False
        )
        result = rlm.run(None, "The task: say hello.")
        rlm.limits = rlm.limits.__class__(max_iterations=2, max_errors=2)
        limited = rlm.run(None, "The task: say hello.")
    assert result.stopped_by == "max_iterations" and result.answer == "best effort"
    assert limited.stopped_by == "max_errors" and limited.answer == "best effort"
    opening = srv.requests[0].messages[1]["content"]
    assert "No separate question was given: the task is in the context." in opening


def test_rlmx_refuses_a_run_with_neither_question_nor_context() -> None:
    from rlmx.errors import ConfigError

    rlm = RlmxRLM(
        "openai:m", model_options=ModelOptions(base_url="http://127.0.0.1:9/v1", api_key="k"), trace=False
    )
    with pytest.raises(ConfigError, match="needs a context"):
        rlm.run(None)


def test_an_interrupt_raises_cancellation_error_with_the_last_reply() -> None:
    from rlmx.compat.rlms import CancellationError

    def interrupt(depth: int, model: str, prompt: str) -> None:
        raise KeyboardInterrupt

    model = ScriptedModel(root=["looking first", repl("rlm_query('sub task')")], child=[ready("'c'")])
    with compat(model, max_depth=2, on_subcall_start=interrupt) as (rlm, _):
        with pytest.raises(CancellationError) as caught:
            rlm.completion(CONTEXT)
    assert caught.value.partial_answer == "looking first"  # the turn whose code was running does not count
    assert str(caught.value) == "Execution cancelled by user (Ctrl+C)"


def test_a_child_stopped_by_a_limit_returns_an_error_text_to_the_parent() -> None:
    model = ScriptedModel(
        root=[repl("r = rlm_query('sub task')\nprint(r)"), ready("r")],
        child=[repl("1/0")],
    )
    with compat(model, max_depth=2, max_errors=1) as (rlm, _):
        out = rlm.completion(CONTEXT)
    assert out.response.startswith("Error: the child run ended by max_errors")
