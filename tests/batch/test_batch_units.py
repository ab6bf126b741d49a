"""Unit tests of the batch's parts, without HTTP, Ray or worker processes: the fleet's ledger and rate
limits (`rlmx.batch.fleet`), `ItemBudget` as the engine's shared budget (`rlmx.batch.client`), the
rate limiter's window and slack (`rlmx.lm.ratelimit`), contexts packed for Ray (`rlmx.batch.shipping`),
the input's checks (`rlmx.batch.items`) and the results file (`rlmx.batch.results`)."""

from __future__ import annotations

import asyncio
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from rlmx import RLM, Limits, SandboxSettings
from rlmx.batch.client import FleetRateLimiter, FleetReservation, InProcessFleetClient, ItemBudget
from rlmx.batch.fleet import BatchLimits, Fleet, RateSpec
from rlmx.batch.items import MAX_LISTED, BatchInputError, read_items
from rlmx.batch.results import ResultsFile
from rlmx.batch.shipping import pack, unpack
from rlmx.context.context import Context
from rlmx.engine.run_state import BUDGET_OUTPUT_TOKENS
from rlmx.errors import BudgetExhausted, ConfigError
from rlmx.lm.base import Usage
from rlmx.lm.ratelimit import RateLimiter
from rlmx.testing import ScriptedModel

LOCAL = SandboxSettings(backend="local")


def reserve(
    fleet: Fleet,
    item: str,
    attempt: int = 1,
    *,
    tokens: int = 0,
    cost: float | None = None,
    final: bool = False,
    final_reserve: float = 0.0,
) -> tuple[int | None, str | None]:
    return fleet.reserve(
        item, attempt, est_tokens=tokens, est_cost_usd=cost, final=final, final_reserve_usd=final_reserve
    )


# --- the fleet's ledger: calls ----------------------------------------------------------------------------


def test_admission_needs_room_for_its_hold_and_one_call() -> None:
    fleet = Fleet(BatchLimits(max_llm_calls=2))
    assert fleet.admit("a", 1) is None  # 0 + hold + one call = 2
    assert fleet.admit("b", 1) == "batch_max_llm_calls"  # 1 held + 2 > 2
    assert fleet.refused_admissions == 1
    grant, refusal = reserve(fleet, "a")
    assert grant is not None and refusal is None
    assert reserve(fleet, "a") == (None, "batch_max_llm_calls")
    assert fleet.reached == "batch_max_llm_calls"


def test_two_admissions_of_five_calls_leave_three_ordinary_calls_then_only_the_holds() -> None:
    fleet = Fleet(BatchLimits(max_llm_calls=5))
    assert fleet.admit("a", 1) is None and fleet.admit("b", 1) is None
    grants = [reserve(fleet, item)[0] for item in ("a", "b", "a")]
    assert all(g is not None for g in grants) and len(set(grants)) == 3
    assert fleet.totals()["in_flight_calls"] == 3 and fleet.reached is None
    assert reserve(fleet, "b") == (None, "batch_max_llm_calls")  # 3 in flight + 2 holds = 5
    assert fleet.reached == "batch_max_llm_calls"

    fleet.settle(grants[0], tokens=10, cost_usd=None, made=False)  # a slot comes back ...
    assert reserve(fleet, "a") == (None, "batch_max_llm_calls")  # ... but the limit was reached
    assert fleet.admit("c", 1) == "batch_max_llm_calls" and fleet.refused_admissions == 1
    fleet.settle(grants[1], tokens=10, cost_usd=None, made=True)
    fleet.settle(grants[2], tokens=20, cost_usd=None, made=True)

    final_a, refusal = reserve(fleet, "a", final=True)  # each admitted attempt still gets its answer
    assert final_a is not None and refusal is None
    final_b, refusal = reserve(fleet, "b", final=True)
    assert final_b is not None and refusal is None
    fleet.settle(final_a, tokens=5, cost_usd=None, made=True)
    fleet.settle(final_b, tokens=5, cost_usd=None, made=True)
    assert reserve(fleet, "a", final=True) == (None, "batch_max_llm_calls")  # the hold is spent
    fleet.finish("a", 1)
    fleet.finish("b", 1)
    totals = fleet.totals()
    assert (totals["calls"], totals["total_tokens"], totals["in_flight_calls"]) == (4, 40, 0)
    assert totals["reached"] == "batch_max_llm_calls" and totals["lost_calls"] == 0


def test_settle_books_made_calls_and_gives_back_unmade_ones() -> None:
    fleet = Fleet(BatchLimits(max_llm_calls=4, max_cost_usd=10.0))
    assert fleet.admit("a", 1) is None
    made, _ = reserve(fleet, "a", tokens=100, cost=0.5)
    cached, _ = reserve(fleet, "a", tokens=100, cost=0.5)
    assert made is not None and cached is not None
    fleet.settle(made, tokens=120, cost_usd=0.25, made=True)
    fleet.settle(cached, tokens=120, cost_usd=None, made=False)  # a cache hit: nothing was sent
    totals = fleet.totals()
    assert (totals["calls"], totals["total_tokens"], totals["cost_usd"], totals["in_flight_calls"]) == (
        1,
        120,
        0.25,
        0,
    )
    # 1 settled + 1 hold: two ordinary calls fit again (the unmade one's slot came back)
    assert reserve(fleet, "a")[0] is not None and reserve(fleet, "a")[0] is not None
    assert reserve(fleet, "a") == (None, "batch_max_llm_calls")


def test_an_unmade_final_answer_gives_its_hold_back() -> None:
    fleet = Fleet(BatchLimits(max_llm_calls=3))
    assert fleet.admit("a", 1) is None
    grant, _ = reserve(fleet, "a")
    assert reserve(fleet, "a")[0] is not None
    assert reserve(fleet, "a") == (None, "batch_max_llm_calls")
    fleet.settle(grant, tokens=1, cost_usd=None, made=True)
    final, _ = reserve(fleet, "a", final=True)
    assert final is not None
    fleet.settle(final, tokens=0, cost_usd=None, made=False)  # e.g. answered from the cache
    again, refusal = reserve(fleet, "a", final=True)  # the hold is there again
    assert again is not None and refusal is None
    fleet.settle(again, tokens=3, cost_usd=None, made=True)
    assert fleet.calls == 2 and fleet.totals()["in_flight_calls"] == 1


def test_abandon_books_unsettled_grants_at_their_estimates_and_releases_the_hold() -> None:
    fleet = Fleet(BatchLimits(max_llm_calls=10, max_cost_usd=10.0))
    assert fleet.admit("a", 1) is None and fleet.admit("b", 1) is None
    settled, _ = reserve(fleet, "a", tokens=50, cost=0.5)
    fleet.settle(settled, tokens=40, cost_usd=0.25, made=True)
    lost = [reserve(fleet, "a", tokens=t, cost=c)[0] for t, c in ((100, 0.5), (200, 1.0))]
    other, _ = reserve(fleet, "b", tokens=7, cost=0.125)
    assert None not in lost and other is not None

    assert fleet.abandon("a", 1) == 2
    totals = fleet.totals()
    assert (totals["calls"], totals["total_tokens"], totals["cost_usd"]) == (3, 340, 1.75)
    assert totals["lost_calls"] == 2 and totals["in_flight_calls"] == 1  # b's call is still in flight
    for grant in lost:  # the lost worker's late reports change nothing
        fleet.settle(grant, tokens=999, cost_usd=9.0, made=True)
    assert fleet.totals() == totals
    # a's hold was released: 3 settled + 1 in flight + b's hold = 5; five more ordinary calls fit
    assert all(reserve(fleet, "b")[0] is not None for _ in range(5))
    assert reserve(fleet, "b") == (None, "batch_max_llm_calls")
    assert fleet.abandon("a", 1) == 0 and fleet.lost_calls == 2


def test_finish_gives_back_an_unused_hold() -> None:
    fleet = Fleet(BatchLimits(max_llm_calls=3))
    assert fleet.admit("a", 1) is None
    assert fleet.admit("b", 1) is None  # 1 held + 2 = 3
    assert fleet.admit("c", 1) == "batch_max_llm_calls"
    fleet.finish("a", 1)
    assert fleet.admit("c", 1) is None
    fleet.finish("b", 1)
    fleet.finish("c", 1)
    fleet.finish("c", 1)  # twice: nothing more to give back
    assert [reserve(fleet, "x")[0] is not None for _ in range(4)] == [True, True, True, False]


# --- the fleet's ledger: tokens and cost ----------------------------------------------------------------


def test_token_budget_refuses_the_call_that_would_reach_it() -> None:
    fleet = Fleet(BatchLimits(max_total_tokens=1_000))
    assert fleet.admit("a", 1) is None
    grant, _ = reserve(fleet, "a", tokens=400)
    assert grant is not None
    assert reserve(fleet, "a", tokens=600) == (None, "batch_max_total_tokens")  # 400 in flight + 600
    assert fleet.reached == "batch_max_total_tokens"
    fleet.settle(grant, tokens=300, cost_usd=None, made=True)
    assert reserve(fleet, "a", tokens=10) == (None, "batch_max_total_tokens")  # reached: no more calls
    final, refusal = reserve(fleet, "a", tokens=800, final=True)
    assert final is not None and refusal is None
    assert fleet.admit("b", 1) == "batch_max_total_tokens"


def test_token_budget_admission_refused_once_tokens_are_spent() -> None:
    fleet = Fleet(BatchLimits(max_total_tokens=100))
    assert fleet.admit("a", 1) is None
    grant, _ = reserve(fleet, "a", tokens=10)
    fleet.settle(grant, tokens=100, cost_usd=None, made=True)
    assert fleet.reached is None
    assert fleet.admit("b", 1) == "batch_max_total_tokens"


def test_cost_budget_counts_the_holds_final_reserve() -> None:
    fleet = Fleet(BatchLimits(max_cost_usd=1.0))
    assert fleet.admit("a", 1) is None and fleet.admit("b", 1) is None
    a1, _ = reserve(fleet, "a", cost=0.125, final_reserve=0.25)
    assert a1 is not None
    assert fleet.totals()["reserved_usd"] == 0.375  # the call in flight and a's hold
    b1, _ = reserve(fleet, "b", cost=0.125, final_reserve=0.25)
    assert b1 is not None  # 0.125 + 0.25 + 0.125 + 0.25 = 0.75
    fleet.settle(a1, tokens=1, cost_usd=0.125, made=True)
    fleet.settle(b1, tokens=1, cost_usd=0.125, made=True)
    # a's latest estimate of its final answer grows: 0.25 spent + 0.5 + b's 0.25 + 0.125 > 1
    assert reserve(fleet, "a", cost=0.125, final_reserve=0.5) == (None, "batch_max_cost_usd")
    assert fleet.reached == "batch_max_cost_usd"
    assert fleet.totals()["reserved_usd"] == 0.75  # the refused call still updated a's hold
    assert fleet.admit("c", 1) == "batch_max_cost_usd"


def test_cost_budget_refuses_an_ordinary_call_that_leaves_no_room_for_the_holds() -> None:
    fleet = Fleet(BatchLimits(max_cost_usd=1.0))
    assert fleet.admit("a", 1) is None
    assert reserve(fleet, "a", cost=0.75, final_reserve=0.5) == (None, "batch_max_cost_usd")
    fresh = Fleet(BatchLimits(max_cost_usd=1.0))
    assert fresh.admit("a", 1) is None
    assert reserve(fresh, "a", cost=0.5, final_reserve=0.5)[0] is not None  # exactly 1.0 fits


def test_a_final_answer_whose_cost_does_not_fit_is_refused_and_keeps_its_hold() -> None:
    fleet = Fleet(BatchLimits(max_cost_usd=1.0))
    assert fleet.admit("a", 1) is None and fleet.admit("b", 1) is None
    a1, _ = reserve(fleet, "a", cost=0.125, final_reserve=0.25)
    b1, _ = reserve(fleet, "b", cost=0.125, final_reserve=0.25)
    fleet.settle(a1, tokens=1, cost_usd=0.125, made=True)
    fleet.settle(b1, tokens=1, cost_usd=0.125, made=True)
    # spent 0.25, b's hold 0.25: a's final answer may cost up to 0.5
    assert reserve(fleet, "a", cost=0.625, final=True) == (None, "batch_max_cost_usd")
    assert fleet.reached is None
    assert fleet.totals()["reserved_usd"] == 0.5  # a's hold is still unused (and still counted)
    final, refusal = reserve(fleet, "a", cost=0.5, final=True)
    assert final is not None and refusal is None
    fleet.settle(final, tokens=1, cost_usd=0.5, made=True)
    assert fleet.totals()["cost_usd"] == 0.75


def test_unpriced_calls_cost_nothing_under_a_cost_budget() -> None:
    fleet = Fleet(BatchLimits(max_cost_usd=0.5))
    assert fleet.admit("a", 1) is None
    grant, _ = reserve(fleet, "a", cost=None)
    assert grant is not None
    fleet.settle(grant, tokens=10, cost_usd=None, made=True)
    assert fleet.spent_usd == 0.0 and fleet.calls == 1  # nothing counted against the budget
    assert fleet.totals()["cost_usd"] is None  # but the batch's cost is unknown, not $0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_llm_calls": 1}, "`batch_max_llm_calls` must be >= 2"),
        ({"max_llm_calls": 0}, "an item needs a call and its final answer"),
        ({"max_total_tokens": 0}, "`batch_max_total_tokens` must be >= 1"),
        ({"max_cost_usd": 0.0}, "`batch_max_cost_usd` must be > 0"),
        ({"max_cost_usd": -1.0}, "`batch_max_cost_usd` must be > 0"),
    ],
)
def test_batch_limits_refuse_bounds_no_item_could_run_under(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("+", r"\+")):
        BatchLimits(**kwargs)


def test_batch_limits_any() -> None:
    assert BatchLimits().any is False
    assert BatchLimits(max_llm_calls=2).any and BatchLimits(max_total_tokens=1).any
    assert BatchLimits(max_cost_usd=0.01).any


def test_fleet_bound_holds_over_random_sequences() -> None:
    """Settled calls + calls in flight + unused holds never exceed max_llm_calls; the fleet's decisions
    are the documented ones; the calls it counts are exactly those made or lost."""
    for seed in range(300):
        rng = random.Random(seed)
        limit = rng.randint(2, 12)
        fleet = Fleet(BatchLimits(max_llm_calls=limit))
        holds: dict[tuple[str, int], bool] = {}  # running attempt -> its hold is unused
        grants: dict[int, tuple[tuple[str, int], bool]] = {}  # in flight -> (attempt, took the hold)
        dead: list[int] = []  # grants of abandoned attempts
        attempts = {item: 0 for item in "abc"}
        made = lost = 0
        for _step in range(60):
            in_use = fleet.calls + len(grants) + sum(holds.values())
            op = rng.choice(["admit", "reserve", "reserve", "final", "settle", "settle", "finish", "abandon"])
            running = sorted(holds)
            if op == "admit":
                item = rng.choice("abc")
                if any(key[0] == item for key in holds):
                    continue
                attempts[item] += 1
                expect_ok = fleet.reached is None and in_use + 2 <= limit
                refusal = fleet.admit(item, attempts[item])
                assert (refusal is None) == expect_ok, (seed, op)
                if refusal is None:
                    holds[item, attempts[item]] = True
                else:
                    assert refusal == "batch_max_llm_calls"
            elif op == "reserve" and running:
                key = rng.choice(running)
                expect_ok = fleet.reached is None and in_use + 1 <= limit
                grant, refusal = reserve(fleet, *key)
                assert (grant is not None) == expect_ok, (seed, op)
                if grant is not None:
                    grants[grant] = (key, False)
                else:
                    assert refusal == "batch_max_llm_calls" and fleet.reached == refusal
            elif op == "final":
                ready = [key for key in running if holds[key]]
                if not ready:
                    continue
                key = rng.choice(ready)
                grant, refusal = reserve(fleet, *key, final=True)
                assert grant is not None and refusal is None, (seed, op)  # the hold is always there
                holds[key] = False
                grants[grant] = (key, True)
            elif op == "settle" and (grants or dead):
                if dead and (not grants or rng.random() < 0.3):
                    before = fleet.totals()
                    fleet.settle(rng.choice(dead), tokens=5, cost_usd=None, made=True)
                    assert fleet.totals() == before
                    continue
                grant = rng.choice(sorted(grants))
                key, took_hold = grants.pop(grant)
                was_made = rng.random() < 0.7
                fleet.settle(grant, tokens=1, cost_usd=None, made=was_made)
                made += was_made
                if not was_made and took_hold and key in holds:
                    holds[key] = True
            elif op == "finish" and running:
                key = rng.choice(running)
                holds.pop(key)
                fleet.finish(*key)
            elif op == "abandon" and running:
                key = rng.choice(running)
                holds.pop(key)
                mine = [g for g, (k, _) in grants.items() if k == key]
                assert fleet.abandon(*key) == len(mine)
                for grant in mine:
                    del grants[grant]
                dead.extend(mine)
                lost += len(mine)
            totals = fleet.totals()
            assert fleet.calls + len(grants) + sum(holds.values()) <= limit, (seed, op)
            assert totals["in_flight_calls"] == len(grants), (seed, op)
            assert fleet.calls == made + lost and totals["lost_calls"] == lost, (seed, op)


# --- ItemBudget: the batch as the engine's shared budget --------------------------------------------------


def test_item_budget_refusal_is_budget_exhausted_naming_the_batch() -> None:
    limits = BatchLimits(max_llm_calls=3)
    fleet = Fleet(limits)
    assert fleet.admit("t-1", 2) is None
    budget = ItemBudget(InProcessFleetClient(fleet), limits, "t-1", 2)
    assert budget.prices_calls is False

    async def go() -> None:
        grants = [
            await budget.reserve(est_tokens=10, est_cost_usd=None, final=False, final_reserve_usd=0.0)
            for _ in range(2)
        ]
        budget.settle(grants[0], tokens=12, cost_usd=None, made=True)
        with pytest.raises(BudgetExhausted) as refused:
            await budget.reserve(est_tokens=10, est_cost_usd=None, final=False, final_reserve_usd=0.0)
        assert refused.value.limit == "batch_max_llm_calls"
        assert "batch max_llm_calls=3" in str(refused.value) and "budget exhausted" in str(refused.value)
        final = await budget.reserve(est_tokens=10, est_cost_usd=None, final=True, final_reserve_usd=0.0)
        budget.settle(final, tokens=3, cost_usd=None, made=True)
        budget.settle(None, tokens=3, cost_usd=None, made=True)  # no grant: nothing to settle
        budget.settle(grants[1], tokens=5, cost_usd=None, made=True)

    asyncio.run(go())
    assert (fleet.calls, fleet.tokens) == (3, 20)


def test_item_budget_final_refusal_and_cost_limit() -> None:
    limits = BatchLimits(max_cost_usd=1.0)
    fleet = Fleet(limits)
    assert fleet.admit("x", 1) is None
    budget = ItemBudget(InProcessFleetClient(fleet), limits, "x", 1)
    assert budget.prices_calls is True

    async def go() -> None:
        with pytest.raises(BudgetExhausted) as refused:
            await budget.reserve(est_tokens=1, est_cost_usd=0.75, final=False, final_reserve_usd=0.5)
        assert refused.value.limit == "batch_max_cost_usd"
        assert "batch max_cost_usd=1.0" in str(refused.value)
        with pytest.raises(BudgetExhausted) as final:
            await budget.reserve(est_tokens=1, est_cost_usd=2.0, final=True, final_reserve_usd=0.0)
        assert final.value.limit == "batch_max_cost_usd"
        assert "batch's budget" in str(final.value)

    asyncio.run(go())


# --- the engine with a shared budget, without HTTP ------------------------------------------------------


def looping_model() -> ScriptedModel:
    return ScriptedModel(root=["```repl\nprint('still looking')\n```"], final="FINAL(forced answer)")


def test_a_run_stops_at_the_batch_call_limit_with_its_forced_final_answer() -> None:
    limits = BatchLimits(max_llm_calls=3)
    fleet = Fleet(limits)
    assert fleet.admit("a", 1) is None
    model = looping_model()
    lm = model.lm()
    rlm = RLM(model=lm, sandbox=LOCAL, trace=False)
    budget = ItemBudget(InProcessFleetClient(fleet), limits, "a", 1)
    result = asyncio.run(rlm.arun("what is it?", "some context", shared=budget))
    assert result.stopped_by == "batch_max_llm_calls"
    assert result.answer == "forced answer" and result.answer_source not in ("none", None)
    assert result.error is None
    # the hold took one call, two root turns fit beside it; the third was refused: the final answer
    assert [c.purpose for c in model.calls] == ["root", "root", "final"]
    assert fleet.calls == len(lm.calls) == 3
    assert fleet.totals()["in_flight_calls"] == 0 and fleet.reached == "batch_max_llm_calls"
    assert result.usage["calls"] == 3
    assert fleet.tokens == result.usage["input_tokens"] + result.usage["output_tokens"] > 0
    assert "batch_max_llm_calls" in model.calls[-1].prompt  # the forced final answer is told why
    fleet.finish("a", 1)
    assert fleet.admit("b", 1) == "batch_max_llm_calls"


def test_a_shared_cost_budget_makes_the_run_send_an_output_cap() -> None:
    def price(_name: str, usage: Usage) -> float:
        return usage.input_tokens * 1e-6 + usage.output_tokens * 2e-6

    run_costs: list[float] = []

    def run(shared_limits: BatchLimits | None) -> tuple[list[int | None], Fleet | None]:
        model = ScriptedModel(root=["```repl\nprint(len(context))\n```", "FINAL(done)"])
        lm = model.lm()
        rlm = RLM(model=lm, sandbox=LOCAL, trace=False, pricer=price, limits=Limits())
        assert rlm.limits.max_cost_usd is None and rlm.limits.max_output_tokens is None
        fleet = None
        shared = None
        if shared_limits is not None:
            fleet = Fleet(shared_limits)
            assert fleet.admit("a", 1) is None
            shared = ItemBudget(InProcessFleetClient(fleet), shared_limits, "a", 1)
        result = asyncio.run(rlm.arun("q", "ctx", shared=shared))
        assert result.answer == "done"
        run_costs.append(result.usage["cost_usd"])
        return [s.max_output_tokens for s in lm.call_settings], fleet

    caps, fleet = run(BatchLimits(max_cost_usd=5.0))
    assert caps == [BUDGET_OUTPUT_TOKENS, BUDGET_OUTPUT_TOKENS]
    assert fleet is not None and fleet.spent_usd == pytest.approx(run_costs[-1])
    assert fleet is not None and fleet.calls == 2 and fleet.spent_usd > 0
    assert fleet.totals()["in_flight_calls"] == 0 and fleet.reached is None
    # the root turns told the fleet what the forced final answer would cost: kept while the item runs
    assert fleet.totals()["reserved_usd"] > 0
    fleet.finish("a", 1)
    assert fleet.totals()["reserved_usd"] == 0
    caps, fleet = run(BatchLimits(max_llm_calls=10))  # a batch without a cost budget: no cap added
    assert caps == [None, None]
    caps, _ = run(None)
    assert caps == [None, None]


# --- the rate limiter: window, slack, try_acquire ---------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_rate_limiter_budgets_scale_with_the_window() -> None:
    assert RateLimiter(60, window_s=2).max_requests == 2
    assert RateLimiter(90, 6_000, window_s=2).max_tokens == 200
    assert RateLimiter(1, window_s=1).max_requests == 1  # never below one request
    assert RateLimiter(600, 1_000).max_requests == 600 and RateLimiter(None, 1_000).max_requests is None
    assert "window_s=2" in repr(RateLimiter(60, window_s=2)) and "window_s" not in repr(RateLimiter(60))
    for bad in ({"window_s": 0}, {"slack_s": -1}):
        with pytest.raises(ConfigError, match="window"):
            RateLimiter(60, **bad)
    with pytest.raises(ConfigError, match="requests_per_minute"):
        RateLimiter(0)
    with pytest.raises(ConfigError, match="tokens_per_minute"):
        RateLimiter(None, 0)


def test_try_acquire_returns_the_wait_and_a_reservation_counts_window_plus_slack() -> None:
    clock = FakeClock()
    limiter = RateLimiter(60, window_s=2, slack_s=0.5, clock=clock, sleep=clock.sleep)
    first, wait = limiter.try_acquire()
    assert first is not None and wait == 0.0 and first.t == 100.0
    clock.now = 101.0
    second, _ = limiter.try_acquire()
    assert second is not None
    refused, wait = limiter.try_acquire()
    assert refused is None and wait == pytest.approx(1.5)  # the first leaves at 100 + 2 + 0.5
    clock.now = 102.2  # past the window, within the slack: still counted
    assert limiter.try_acquire() == (None, pytest.approx(0.3))
    clock.now = 102.5
    third, wait = limiter.try_acquire()
    assert third is not None and wait == 0.0
    assert limiter.try_acquire() == (None, pytest.approx(1.0))  # now the second is the oldest


def test_try_acquire_tokens_and_settle() -> None:
    clock = FakeClock()
    limiter = RateLimiter(None, 600, window_s=6, clock=clock, sleep=clock.sleep)  # 60 tokens a window
    big, _ = limiter.try_acquire(50)
    assert big is not None
    clock.now += 1
    assert limiter.try_acquire(20) == (None, pytest.approx(5.0))
    limiter.settle(big, 5)  # the call used fewer tokens than estimated
    assert limiter.try_acquire(20)[0] is not None
    clock.now += 10
    huge, wait = limiter.try_acquire(1_000)  # alone over the budget, but the window is empty
    assert huge is not None and wait == 0.0


def test_acquire_waits_on_the_injected_clock() -> None:
    clock = FakeClock()
    limiter = RateLimiter(60, window_s=1, slack_s=0.25, clock=clock, sleep=clock.sleep)

    async def go() -> None:
        await limiter.acquire()
        await limiter.acquire()

    asyncio.run(go())
    assert clock.slept == [pytest.approx(1.25)] and limiter.waited_s == pytest.approx(1.25)
    assert clock.now == pytest.approx(101.25)


def test_fleet_rate_acquire_without_and_with_a_limit() -> None:
    fleet = Fleet(rates={"p:rated": RateSpec(rpm=60), "p:empty": RateSpec()}, window_s=2.0, slack_s=0.25)
    assert fleet.rate_acquire("p:free", 100) == (0, 0.0)
    assert fleet.rate_acquire("p:empty", 100) == (0, 0.0)
    ids = [fleet.rate_acquire("p:rated", 0) for _ in range(2)]
    assert all(wait == 0.0 for _, wait in ids)
    rids = [rid for rid, _ in ids]
    assert all(isinstance(r, int) and r > 0 for r in rids) and len(set(rids)) == 2
    rid, wait = fleet.rate_acquire("p:rated", 0)
    assert rid is None and 0 < wait <= 2.25
    assert fleet.rate_waits == 1 and fleet.totals()["rate_waits"] == 1
    fleet.rate_settle(rids[0], 10)
    fleet.rate_settle(rids[0], 10)  # twice, or an unknown id: nothing happens
    fleet.rate_settle(12345, 10)


def test_fleet_rate_settle_corrects_the_tokens() -> None:
    fleet = Fleet(rates={"p:m": RateSpec(tpm=600)}, window_s=6.0)  # 60 tokens a window
    rid, _ = fleet.rate_acquire("p:m", 50)
    assert rid
    assert fleet.rate_acquire("p:m", 20)[0] is None
    fleet.rate_settle(rid, 5)
    granted, wait = fleet.rate_acquire("p:m", 20)
    assert granted and wait == 0.0


def test_fleet_rate_limiter_through_a_local_client() -> None:
    fleet = Fleet(rates={"p:m": RateSpec(tpm=600)}, window_s=6.0)
    client = InProcessFleetClient(fleet)
    rated = FleetRateLimiter(client, "p:m")
    free = FleetRateLimiter(client, "p:free")

    async def go() -> None:
        reservation = await rated.acquire(50)
        assert isinstance(reservation, FleetReservation) and reservation.rid > 0
        rated.settle(reservation, 5)
        nothing = await free.acquire(50)
        assert nothing.rid == 0
        free.settle(nothing, 5)

    asyncio.run(go())
    assert fleet.rate_acquire("p:m", 50)[0] is not None  # 5 + 50 <= 60 after the settle
    assert "p:m" in repr(rated)


# --- shipping contexts -----------------------------------------------------------------------------------


def make_folder(root: Path, *, data: str = "line one\nline two\n") -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "notes.md").write_text("hello notes\n")
    (root / "same.txt").write_text("hello notes\n")  # the same bytes as notes.md: one blob
    (root / "sub" / "data.txt").write_text(data)
    (root / "rows.jsonl").write_text('{"n": 1}\n{"n": 2}\n')
    return root


def test_pack_ships_a_small_folder_by_content_hash(tmp_path: Path) -> None:
    one = Context.from_paths([make_folder(tmp_path / "one")])
    two = Context.from_paths([make_folder(tmp_path / "two")])
    changed = Context.from_paths([make_folder(tmp_path / "three", data="line one\nline twO\n")])
    p1, p2, p3 = pack(one), pack(two), pack(changed)
    assert (p1.kind, p2.kind, p3.kind) == ("files", "files", "files")
    assert p1.key == p2.key and len(p1.key) == 64
    assert p3.key != p1.key
    assert len(p1.blobs) == 3  # four files, two with the same bytes
    assert p1.given == (str(tmp_path / "one"),)
    assert p1.size == sum(len(b) for b in p1.blobs.values())
    renamed = tmp_path / "four"
    make_folder(renamed)
    (renamed / "same.txt").rename(renamed / "other.txt")
    assert pack(Context.from_paths([renamed])).key != p1.key  # the names the model sees count too


def test_unpack_gives_the_same_context_from_a_content_addressed_cache(tmp_path: Path) -> None:
    original = Context.from_paths([make_folder(tmp_path / "src")])
    shipped = pack(original)
    cache = tmp_path / "cache"
    node_side = unpack(shipped, cache)
    assert node_side.load() == original.load()
    assert node_side.describe() == original.describe()
    assert node_side.given == original.given
    names = sorted(os.listdir(cache))
    assert names == sorted(entry.path for entry in shipped.value.files)
    assert len(names) == 4 and all(name.split(".", 1)[0] in shipped.blobs for name in names)
    for entry in node_side.manifest.files:
        assert Path(entry.path).parent == cache
    before = {name: os.stat(cache / name).st_mtime_ns for name in names}
    again = unpack(shipped, cache)
    assert again.load() == original.load()
    assert {name: os.stat(cache / name).st_mtime_ns for name in os.listdir(cache)} == before  # reused


def test_unpack_of_a_single_file(tmp_path: Path) -> None:
    (tmp_path / "only.txt").write_text("just this\n")
    original = Context.from_paths([tmp_path / "only.txt"])
    node_side = unpack(pack(original), tmp_path / "cache")
    assert node_side.load() == original.load() == "just this\n"
    assert node_side.describe() == original.describe()


def test_big_contexts_travel_as_paths_and_text_as_a_value(tmp_path: Path) -> None:
    original = Context.from_paths([make_folder(tmp_path / "big")])
    shipped = pack(original, max_bytes=10)
    assert shipped.kind == "paths" and shipped.blobs == {} and shipped.key == ""
    node_side = unpack(shipped, tmp_path / "cache")
    assert node_side.load() == original.load()
    assert [e.path for e in node_side.manifest.files] == [e.path for e in original.manifest.files]
    assert not (tmp_path / "cache").exists()

    text = pack(Context.of("inline text"))
    assert text.kind == "value" and text.value == "inline text" and text.size == len("inline text")
    assert text.key == pack(Context.of("inline text")).key != pack(Context.of("other")).key
    assert unpack(text, tmp_path / "cache").load() == "inline text"
    none = pack(None)
    assert none.kind == "none" and unpack(none, tmp_path / "cache") is None


# --- batch input ---------------------------------------------------------------------------------------


def test_read_items_reads_every_form_of_context_and_schema(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("x")
    (tmp_path / "b.md").write_text("y")
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    rows = [
        {"id": 7, "question": "q1", "context": "data/a.txt", "meta": {"k": [1, 2]}},
        {"id": "x", "question": "q2", "context": ["data", "b.md"], "output_schema": "schema.json"},
        {
            "id": "y",
            "question": "q3",
            "context": {"text": "inline"},
            "output_schema": schema,
            "limits": {"max_iterations": 4},
            "model": "openai:gpt-5-mini",
            "meta": "m",
        },
    ]
    lines = [json.dumps(rows[0]), "", "   ", json.dumps(rows[1]), json.dumps(rows[2])]
    source = tmp_path / "in.jsonl"
    source.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    items = read_items(source, cwd=tmp_path)
    assert [(i.id, i.line) for i in items] == [(7, 1), ("x", 4), ("y", 5)]
    assert items[0].context == (str(tmp_path / "data" / "a.txt"),) and items[0].meta == {"k": [1, 2]}
    assert items[0].key == "7"
    assert items[1].context == (str(tmp_path / "data"), str(tmp_path / "b.md"))
    assert items[1].output_schema == str(tmp_path / "schema.json") and items[1].meta is None
    assert items[2].context == {"text": "inline"} and items[2].output_schema == schema
    assert items[2].limits == {"max_iterations": 4} and items[2].model == "openai:gpt-5-mini"
    assert items[2].meta == "m"
    with pytest.raises(BatchInputError, match="not found"):
        read_items(source, cwd=elsewhere)  # relative paths resolve against cwd


def test_read_items_names_every_bad_line_in_order(tmp_path: Path) -> None:
    lines = [
        json.dumps({"id": 7, "question": "q"}),
        json.dumps({"id": "7", "question": "q"}),
        "{not json",
        json.dumps({"question": "q"}),
        json.dumps({"id": 1, "question": "q", "context": "nope.txt"}),
        json.dumps({"id": 2, "question": "q", "colour": "red"}),
        json.dumps({"id": 3, "question": "q", "model": "no-provider"}),
        json.dumps({"id": 4, "question": "q", "limits": {"max_wishes": 3}}),
        json.dumps({"id": 5, "question": "q", "output_schema": "missing.json"}),
        json.dumps({"id": True, "question": "q"}),
        "",
        json.dumps({"id": 6, "question": "  "}),
    ]
    source = tmp_path / "bad.jsonl"
    source.write_text("\n".join(lines))
    with pytest.raises(BatchInputError) as caught:
        read_items(source, cwd=tmp_path)
    problems = caught.value.problems
    assert [int(p.split(":")[0].split()[1]) for p in problems] == [2, 3, 4, 5, 6, 7, 8, 9, 10, 12]
    assert "id '7' repeats line 1" in problems[0]
    assert "not JSON" in problems[1]
    assert '"id" is required' in problems[2] and '"id" is required' in problems[8]
    assert "context 'nope.txt' not found" in problems[3]
    assert "unknown key colour" in problems[4]
    assert "PROVIDER:MODEL" in problems[5]
    assert "unknown limit max_wishes" in problems[6]
    assert "output_schema file 'missing.json' not found" in problems[7]
    assert '"question" is required' in problems[9]
    message = str(caught.value)
    assert message.startswith(f"{source}: 10 bad input lines; nothing was run:")
    assert "more" not in message


def test_read_items_lists_twenty_bad_lines_and_counts_the_rest(tmp_path: Path) -> None:
    lines = ["[]"] * 25
    lines[11] = "{oops"  # a JSON error among object errors: still in line order (12 after 9, not 1)
    source = tmp_path / "many.jsonl"
    source.write_text("\n".join(lines))
    with pytest.raises(BatchInputError) as caught:
        read_items(source, cwd=tmp_path)
    problems = caught.value.problems
    assert len(problems) == 25
    assert [p.split(":")[0] for p in problems] == [f"line {n}" for n in range(1, 26)]
    assert "not JSON" in problems[11] and "expected a JSON object, got list" in problems[10]
    message = str(caught.value)
    assert "25 bad input lines" in message
    assert message.endswith(f"\n  ... and {25 - MAX_LISTED} more")
    assert "line 20:" in message and "line 21:" not in message


def test_read_items_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        read_items(tmp_path / "absent.jsonl")


# --- the results file ------------------------------------------------------------------------------------


def test_results_load_keeps_the_latest_line_per_id_and_drops_a_partial_last_line(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text(
        '{"id": 1, "answer": "a"}\n\n{"id": "2", "answer": "b"}\n{"id": "1", "answer": "c"}\n{"id": 3, "ans'
    )
    results = ResultsFile(path)
    loaded = results.load()
    assert loaded == {"1": {"id": "1", "answer": "c"}, "2": {"id": "2", "answer": "b"}}
    assert results.lines == 3 and results.dropped_partial is True

    results.open()  # the cut line goes before anything is appended
    results.append({"id": 4, "answer": "d"})
    results.close()
    text = path.read_text()
    assert "ans\n" not in text and text.endswith('{"id": 4, "answer": "d"}\n')
    assert len(text.splitlines()) == 5
    again = ResultsFile(path)
    assert set(again.load()) == {"1", "2", "4"} and again.dropped_partial is False
    assert ResultsFile(tmp_path / "none.jsonl").load() == {}


def test_results_rewrite_is_one_line_per_id_without_a_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    results = ResultsFile(path)
    for record in ({"id": 1, "answer": "x"}, {"id": 2, "answer": "é"}, {"id": 1, "answer": "y"}):
        results.append(record)
    latest = results.load()
    results.rewrite(latest.values())  # closes the append handle first
    assert os.listdir(tmp_path) == ["out.jsonl"]
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [{"id": 1, "answer": "y"}, {"id": 2, "answer": "é"}]
    assert ResultsFile(path).load() == latest


def test_results_a_bad_middle_line_is_a_config_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text('{"id": 1}\nnot json\n{"id": 2}\n')
    with pytest.raises(ConfigError, match=r"line 2, is not JSON"):
        ResultsFile(path).load()
    path.write_text('{"id": 1}\n{"answer": 2}\n')
    with pytest.raises(ConfigError, match=r"line 2, has no id"):
        ResultsFile(path).load()


def test_a_ctrl_c_in_an_item_s_step_before_the_wait_began_leaves_nothing_on_stderr() -> None:
    """`rlmx batch` printed "coroutine 'wait' was never awaited", then (after a first fix) "cannot reuse
    already awaited coroutine", when the Ctrl-C landed in an item's step before the executor's wait
    had started: the loop must end with no warning and nothing for its exception handler."""
    import gc
    import warnings

    from rlmx.batch.in_process import InProcessExecutor

    async def interrupted() -> None:
        raise KeyboardInterrupt

    executor = InProcessExecutor()
    reported: list[dict[str, Any]] = []
    executor.loop.set_exception_handler(lambda loop, context: reported.append(context))
    for coroutine in (interrupted(), asyncio.sleep(3600)):  # the first step taken is the Ctrl-C
        executor.tasks[executor.loop.create_task(coroutine)] = (None, 1)  # type: ignore[index,assignment]
    gc.collect()  # what earlier tests left behind is collected before the watch starts
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(KeyboardInterrupt):
            executor.wait(1.0)
        executor.close()
        gc.collect()
    # a ResourceWarning names its object: one about another test's event loop (CI's serial run has Ray's
    # tests before this one, and their loops can become garbage late) is not this executor's
    ours = [
        w
        for w in caught
        if not (isinstance(w.source, asyncio.AbstractEventLoop) and w.source is not executor.loop)
    ]
    assert [str(w.message) for w in ours] == []
    assert executor.loop.is_closed()
    assert [(c.get("message"), repr(c.get("exception"))) for c in reported] == []


def test_a_batch_with_nothing_left_to_run_holds_no_event_loop(tmp_path: Path) -> None:
    """A resumed batch whose every id is written, or one never iterated, left the local executor's event
    loop unclosed (a ResourceWarning at garbage collection; CI's serial run caught it in another test)."""
    import gc
    import warnings

    from rlmx.batch import run as run_batch
    from rlmx.batch.in_process import InProcessExecutor

    model = ScriptedModel(root=["FINAL(done)"])
    rlm = RLM(model=model.lm(), sandbox=LOCAL, trace=False)
    out = tmp_path / "results.jsonl"
    (tmp_path / "ctx.txt").write_text("some context", encoding="utf-8")
    items = [{"id": "a", "question": "q", "context": str(tmp_path / "ctx.txt")}]
    assert [row["answer"] for row in run_batch(items, rlm, out=out)] == ["done"]
    gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = run_batch(items, rlm, out=out)
        assert again.todo == [] and list(again) == []
        never_iterated = run_batch(items, rlm, out=tmp_path / "other.jsonl")
        executors = [again.executor, never_iterated.executor]
        assert all(isinstance(e, InProcessExecutor) for e in executors)
        held = [vars(e).get("_loop", vars(e).get("loop")) for e in executors]
        assert [loop is None or loop.is_closed() for loop in held] == [True, True]
        del again, never_iterated, executors, held
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
