"""max_cost_usd: enforced before each call from a worst-case estimate, for the whole tree.

Every spend here is recomputed from the scripted server's own request log (what it was asked and what
it answered), never from rlmx's accounting, and compared with the budget.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import rlmx.trace
from observability_runs import (
    SCRIPTED,
    SCRIPTED_PRICE,
    input_tokens_of,
    output_tokens_of,
    scripted_pricing,
)
from policies import is_child, is_forced_final, is_rlm, is_root, is_sub, repl, turn
from rlmx import RLM, ConfigError, Limits, ModelOptions, SandboxSettings
from rlmx.engine.run_state import BUDGET_OUTPUT_TOKENS
from rlmx.lm.base import Usage, estimate_message_tokens, estimate_tokens
from rlmx.testing import CallInfo, Reply, ScriptedRequest, ScriptedServer
from rlmx.trace import Exec

CHILDREN = 6
LEAVES = 4


def batched_children_policy(inflate: float = 1.0) -> Any:
    """Root: 6 child RLMs in one rlm_query_batched; each child: a 4-prompt llm_query_batched, then FINAL.
    The server reports `inflate` x the input tokens the engine estimates (1.0: never more)."""

    def text_for(messages: list[dict[str, Any]], call: CallInfo) -> str:
        if not is_rlm(call):
            return "leaf answer"
        if is_forced_final(call):
            return "FINAL(forced answer)"
        if is_child(call):  # asked "child N"
            if turn(messages) == 0:
                return repl(
                    f"parts = llm_query_batched(['piece %d' % i for i in range({LEAVES})])\nprint(parts)"
                )
            return "FINAL_VAR(parts)"
        if turn(messages) == 0:
            return repl(f"res = rlm_query_batched(['child %d' % i for i in range({CHILDREN})])\nprint(res)")
        return "FINAL_VAR(res)"

    def policy(messages: list[dict[str, Any]], request: Any) -> Reply:
        tokens_in = int(input_tokens_of(messages) * inflate)
        return Reply(
            text_for(messages, request), input_tokens=tokens_in, output_tokens=output_tokens_of(request.body)
        )

    return policy


def served(requests: list[ScriptedRequest]) -> list[ScriptedRequest]:
    return [r for r in requests if r.status == 200]


def spend(requests: list[ScriptedRequest], inflate: float = 1.0) -> float:
    """USD the server's answers cost, from its own log: the tokens it reported, at the scripted price."""
    return sum(
        SCRIPTED_PRICE.cost(
            Usage(
                input_tokens=int(input_tokens_of(r.messages) * inflate),
                output_tokens=output_tokens_of(r.body),
            )
        )
        for r in served(requests)
    )


def estimate_error(request: ScriptedRequest, inflate: float) -> float:
    """How much more a request cost than the engine's worst-case estimate of it (0 if it cost less)."""
    reported = int(input_tokens_of(request.messages) * inflate)
    estimated = estimate_message_tokens(request.messages)
    return max(0.0, (reported - estimated) * SCRIPTED_PRICE.input_per_mtok / 1_000_000)


def run(srv: ScriptedServer, tmp_path: Path, budget: float | None, **limits: Any) -> Any:
    rlm = RLM(
        SCRIPTED,
        model_options=ModelOptions(base_url=srv.url),
        limits=Limits(**{"max_depth": 2, "max_cost_usd": budget, "max_output_tokens": 200, **limits}),
        trace=tmp_path / f"budget-{budget}.jsonl",
        pricer=scripted_pricing(),
        sandbox=SandboxSettings(output_chars=2_000),  # a smaller worst case for the final answer's input
    )
    return rlm.run("What do the children say?", "some context " * 40)


def full_cost(tmp_path: Path, policy: Any, inflate: float = 1.0) -> float:
    with ScriptedServer(policy) as srv:
        result = run(srv, tmp_path, None)
        requests = srv.requests
    assert result.stopped_by == "final", result.error
    assert len(served(requests)) == 2 + CHILDREN * (2 + LEAVES)
    return spend(requests, inflate)


def test_depth2_batched_children_budget_stops_mid_batch_and_spend_stays_under(tmp_path: Path) -> None:
    policy = batched_children_policy()
    budget = full_cost(tmp_path, policy) * 0.6
    with ScriptedServer(policy) as srv:
        result = run(srv, tmp_path, budget)
        requests = srv.requests
    spent = spend(requests)
    assert spent <= budget  # the server never reports more input tokens than estimated: no error at all
    assert result.stopped_by == "max_cost_usd"
    # the forced final answer was kept back, and made
    assert result.answer == "forced answer"
    assert is_root(requests[-1]) and is_forced_final(requests[-1])
    # rlmx's own accounting agrees with the server's log, call for call
    assert result.usage["calls"] == len(served(requests))
    assert result.usage["cost_usd"] == pytest.approx(spent, rel=1e-9)
    # it stopped in the middle of the batch: some children (or their sub-calls) ran, some were refused
    trace = rlmx.trace.load(result.trace_path)
    (batch,) = [b for cell in trace.root.turns[0].cells for b in cell.batches]
    assert batch.method == "rlm_query_batched" and batch.end is not None
    children = trace.root.turns[0].cells[0].children
    leaf_calls = [c for child in children for c in child.lm_calls() if c.purpose == "llm_query"]
    assert 0 < len(leaf_calls) < CHILDREN * LEAVES
    refused = [e for e in trace.of_type(Exec) if "max_cost_usd" in json.dumps(e.output or "")]
    assert batch.end.errors or refused
    assert trace.usage() == {k: v for k, v in result.usage.items() if k != "wall_time_s"}


def test_llm_query_batch_is_cut_mid_batch(tmp_path: Path) -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> Reply:
        if not is_rlm(request):
            text = "leaf"
        elif is_forced_final(request):
            text = "FINAL(forced)"
        elif turn(messages) == 0:
            text = repl(
                "out = llm_query_batched(['q%d' % i for i in range(40)])\nprint(sum(o.startswith('[llm_query error]') for o in out), 'refused')"
            )
        else:
            text = "FINAL(done)"
        return Reply(
            text, input_tokens=input_tokens_of(messages), output_tokens=output_tokens_of(request.body)
        )

    with ScriptedServer(policy) as srv:
        unlimited = run(srv, tmp_path, None, max_depth=1)
        full = spend(srv.requests)
    assert unlimited.stopped_by == "final"
    budget = full * 0.7
    with ScriptedServer(policy) as srv:
        result = run(srv, tmp_path, budget, max_depth=1)
        requests = srv.requests
    assert spend(requests) <= budget
    leaves = [r for r in served(requests) if is_sub(r)]
    assert 0 < len(leaves) < 40
    second_turn = next(r for r in requests if is_root(r) and turn(r.messages) == 1)
    assert f"{40 - len(leaves)} refused" in second_turn.messages[-1]["content"]
    # refused calls give their reservations back, so the root may still afford its next turn
    assert (result.stopped_by, result.answer) in (("final", "done"), ("max_cost_usd", "forced"))


def test_under_estimated_input_overshoots_by_at_most_one_calls_error(tmp_path: Path) -> None:
    inflate = 1.5  # the provider's tokenizer counts 50% more input tokens than rlmx's estimate
    policy = batched_children_policy(inflate)
    budget = full_cost(tmp_path, policy, inflate) * 0.5
    with ScriptedServer(policy) as srv:
        result = run(srv, tmp_path, budget, max_concurrent_children=1)  # one call in flight at a time
        requests = served(srv.requests)
    worst_error = max(estimate_error(r, inflate) for r in requests)
    assert worst_error > 0
    assert spend(requests, inflate) <= budget + worst_error
    assert result.stopped_by == "max_cost_usd"
    assert result.usage["cost_usd"] == pytest.approx(spend(requests, inflate), rel=1e-9)


def test_every_call_under_a_budget_carries_an_output_cap(tmp_path: Path) -> None:
    policy = batched_children_policy()
    with ScriptedServer(policy) as srv:
        RLM(
            SCRIPTED,
            model_options=ModelOptions(base_url=srv.url),
            limits=Limits(max_depth=2, max_cost_usd=1_000.0),
            pricer=scripted_pricing(),
            trace=False,
        ).run("q", "ctx")
        bodies = [r.body for r in served(srv.requests)]
    assert bodies and all(b.get("max_tokens") == BUDGET_OUTPUT_TOKENS for b in bodies)


def test_a_budget_too_small_for_any_call_makes_no_ordinary_call(tmp_path: Path) -> None:
    """Refused at start (issue 13: it used to stop before the first turn without saying why)."""
    policy = batched_children_policy()
    with ScriptedServer(policy) as srv:
        with pytest.raises(ConfigError, match=r"cannot pay for the first model call") as refused:
            run(srv, tmp_path, 0.0001)
        requests = srv.requests
    assert requests == []
    message = str(refused.value)
    assert "the smallest budget that can run is $" in message and "`max_output_tokens`" in message
    found = re.search(r"smallest budget that can run is \$([0-9.e-]+?)\. Raise", message)
    assert found is not None, message
    smallest = float(found.group(1))
    with ScriptedServer(policy) as srv:  # the suggested budget is enough to start
        result = run(srv, tmp_path, smallest)
    assert result.stopped_by in ("final", "max_cost_usd")


def test_unknown_price_refuses_the_run_before_any_call(tmp_path: Path) -> None:
    policy = batched_children_policy()
    with ScriptedServer(policy) as srv:
        rlm = RLM(
            SCRIPTED,
            model_options=ModelOptions(base_url=srv.url),
            limits=Limits(max_cost_usd=1.0),
            trace=False,
        )
        with pytest.raises(ConfigError, match=r"cannot be enforced: no price is known for openai:scripted"):
            rlm.run("q", "ctx")
        assert srv.requests == []


def test_unknown_price_allowed_runs_and_says_so(tmp_path: Path) -> None:
    trace = tmp_path / "unpriced.jsonl"
    with ScriptedServer(lambda m, r: "FINAL(ok)") as srv:
        result = RLM(
            SCRIPTED,
            model_options=ModelOptions(base_url=srv.url),
            limits=Limits(max_cost_usd=0.01),
            trace=trace,
            allow_unpriced=True,
        ).run("q", "ctx")
    assert result.answer == "ok" and result.usage["cost_usd"] is None
    start = rlmx.trace.load(trace).run_start
    assert start.unpriced_models == [SCRIPTED]
    assert "not counted against max_cost_usd=0.01" in start.warnings[0]


def lookup(key: str) -> str:
    """Look a key up in the user's records."""
    return key


BIG_TOOLS = {"lookup": {"tool": lookup, "description": "Look a key up in the records. " * 400}}


def first_call_run(srv: ScriptedServer, budget: float | None, tools: Any = None) -> Any:
    rlm = RLM(
        SCRIPTED,
        model_options=ModelOptions(base_url=srv.url),
        limits=Limits(max_cost_usd=budget, max_output_tokens=200),
        trace=False,
        pricer=scripted_pricing(),
        tools=tools,
    )
    return rlm.run("What do the records say?", "some context " * 40)


def refusal_of(budget: float, tools: Any = None) -> tuple[int, float]:
    """(estimated input tokens, smallest budget that can run) from the first call's refusal."""
    with ScriptedServer(lambda m, r: "FINAL(ok)") as srv:
        with pytest.raises(ConfigError, match=r"cannot pay for the first model call") as refused:
            first_call_run(srv, budget, tools)
        assert srv.requests == []
    message = str(refused.value)
    found = re.search(
        r"\(([0-9,]+) input tokens .* smallest budget that can run is \$([0-9.e-]+?)\. Raise", message
    )
    assert found is not None, message
    return int(found.group(1).replace(",", "")), float(found.group(2))


def test_the_first_call_estimate_is_the_first_request_with_its_tools_section() -> None:
    # the system prompt names the budget: one that runs and one refused, written with as many characters
    enough, refused = 1000.0, 0.0001
    assert len(str(enough)) == len(str(refused))
    with ScriptedServer(lambda m, r: "FINAL(ok)") as srv:
        assert first_call_run(srv, enough, BIG_TOOLS).answer == "ok"
        first = srv.requests[0]
    assert "## Tools" in first.messages[0]["content"]  # the section is in the real system prompt
    estimated, smallest_with_tools = refusal_of(refused, BIG_TOOLS)
    assert estimated == estimate_message_tokens(first.messages)  # the estimate is that very request's
    plain_tokens, smallest = refusal_of(refused)
    assert estimated - plain_tokens >= estimate_tokens(BIG_TOOLS["lookup"]["description"]) - 10
    # a budget that starts a run without tools is refused with them
    with ScriptedServer(lambda m, r: "FINAL(ok)") as srv:
        assert first_call_run(srv, smallest).answer == "ok"
    assert smallest < smallest_with_tools
    refusal_of(smallest, BIG_TOOLS)
