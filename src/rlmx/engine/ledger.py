"""One ledger for the whole call tree: limits are checked here, before every call."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlmx.errors import BudgetExhausted
from rlmx.limits import Limits
from rlmx.lm.base import Usage
from rlmx.outcomes import LimitReason
from rlmx.usage import UsageBook, UsageTotals


@dataclass
class Ledger:
    """Counts every logical model call of a run tree and refuses the ones a limit forbids.

    A `parent` (a session's ledger, see rlmx.session) is charged with every call too, and its limits
    are checked beside this one's: a call must fit both."""

    limits: Limits
    parent: Ledger | None = None
    scope: str = ""  # "session " for a session's ledger: its messages name it
    started: float = field(default_factory=time.monotonic)
    book: UsageBook = field(default_factory=UsageBook)
    in_flight: int = 0
    timed_out: bool = False
    spent_usd: float = 0.0  # known costs of made calls (unpriced calls add nothing)
    reserved_usd: float = 0.0  # worst-case estimates of the calls in flight
    final_reserve_usd: float = 0.0  # worst-case estimate of the forced final answer, kept back

    @property
    def total(self) -> UsageTotals:
        return self.book.total

    @property
    def deadline(self) -> float | None:
        """The run's hard end (`time.monotonic()`), the forced final answer included."""
        own = None if self.limits.timeout_s is None else self.started + self.limits.timeout_s
        return _earliest(own, self.parent.deadline if self.parent else None)

    @property
    def work_deadline(self) -> float | None:
        """The end of the turns and sub-calls: the deadline less the final answer's reserve."""
        own = None
        if self.limits.timeout_s is not None:
            own = self.started + self.limits.timeout_s - self.limits.final_reserve()
        return _earliest(own, self.parent.work_deadline if self.parent else None)

    def remaining_s(self) -> float | None:
        """Working time left (before the final answer's reserve); None without a timeout."""
        deadline = self.work_deadline
        return None if deadline is None else deadline - time.monotonic()

    def tokens_used(self) -> int:
        return self.total.input_tokens + self.total.output_tokens

    def cost_left(self) -> float | None:
        """USD left under `max_cost_usd` after made calls and calls in flight; None without a budget."""
        budget = self.limits.max_cost_usd
        own = None if budget is None else budget - self.spent_usd - self.reserved_usd
        return _earliest(own, self.parent.cost_left() if self.parent else None)

    def chain(self) -> list[Ledger]:
        """This ledger and the ones above it (a session's)."""
        return [self, *(self.parent.chain() if self.parent else [])]

    def exhausted(
        self, *, est_input_tokens: int = 0, est_cost_usd: float | None = None
    ) -> LimitReason | None:
        """The limit that forbids another ordinary call (one is kept for the forced final answer), this
        ledger's or its parent's.

        `est_cost_usd` is the call's worst-case cost (its input priced plus `max_output_tokens`); the call
        must fit beside the calls in flight and the forced final answer's reserved estimate."""
        found = self._refusal(est_input_tokens, est_cost_usd)
        return found[0] if found else None

    def _refusal(
        self, est_input_tokens: int, est_cost_usd: float | None
    ) -> tuple[LimitReason, Ledger] | None:
        for ledger in self.chain():
            limit = ledger._own_limit(est_input_tokens, est_cost_usd)
            if limit is not None:
                return limit, ledger
        return None

    def _own_limit(self, est_input_tokens: int, est_cost_usd: float | None) -> LimitReason | None:
        limits = self.limits
        if self.total.calls + self.in_flight >= limits.max_llm_calls - 1:
            return "max_llm_calls"
        if limits.max_total_tokens is not None and (
            self.tokens_used() + est_input_tokens >= limits.max_total_tokens
        ):
            return "max_total_tokens"
        budget = limits.max_cost_usd
        left = None if budget is None else budget - self.spent_usd - self.reserved_usd
        if left is not None and est_cost_usd is not None and est_cost_usd + self.final_reserve_usd > left:
            return "max_cost_usd"
        own_end = None
        if limits.timeout_s is not None:
            own_end = self.started + limits.timeout_s - limits.final_reserve()
        if self.timed_out or (own_end is not None and own_end - time.monotonic() <= 0):
            return "timeout"
        return None

    def acquire(
        self, *, final: bool = False, est_input_tokens: int = 0, est_cost_usd: float | None = None
    ) -> float:
        """Take one call slot or raise BudgetExhausted. `final` may use the reserved last call (the
        caller fits its output cap to `cost_left()`). Returns the USD reserved for the call."""
        if final:
            for ledger in self.chain():
                if ledger.total.calls + ledger.in_flight >= ledger.limits.max_llm_calls:
                    raise BudgetExhausted(
                        "max_llm_calls", f"no {ledger.scope}model call left, not even for the final answer"
                    )
            left = self.cost_left()
            if left is not None and est_cost_usd is not None and est_cost_usd > left:
                raise BudgetExhausted("max_cost_usd", "no budget left, not even for the final answer")
        else:
            found = self._refusal(est_input_tokens, est_cost_usd)
            if found is not None:
                limit, ledger = found
                raise BudgetExhausted(limit, budget_message(limit, ledger.limits, ledger.scope))
        reserved = est_cost_usd or 0.0
        for ledger in self.chain():
            ledger.in_flight += 1
            ledger.reserved_usd += reserved
        return reserved

    def calls_left(self) -> int:
        """Model calls the run may still make (the one kept for the final answer included)."""
        return min(
            ledger.limits.max_llm_calls - ledger.total.calls - ledger.in_flight for ledger in self.chain()
        )

    def reserve_for_final(self, usd: float) -> None:
        """Keep `usd` (the forced final answer's worst case, updated each root turn) out of reach of
        ordinary calls."""
        for ledger in self.chain():
            ledger.final_reserve_usd = usd

    def final_output_cap(self, est_usd: float, input_usd: float, cap: int, *, floor: int) -> int:
        """The forced final answer's output cap, fitted to what is left of the budget: `cap` when its
        worst case `est_usd` fits, else the output tokens the rest pays for (at least `floor`)."""
        left = self.cost_left()
        if left is None or est_usd <= left:
            return cap
        per_output_token = (est_usd - input_usd) / cap
        fits = int((left - input_usd) / per_output_token) if per_output_token > 0 else cap
        return max(floor, min(cap, fits))

    def release(self, reserved_usd: float = 0.0) -> None:
        """Give back a slot whose call was never made (e.g. answered from a cache)."""
        for ledger in self.chain():
            ledger.in_flight -= 1
            ledger.reserved_usd = max(0.0, ledger.reserved_usd - reserved_usd)

    def record(
        self, model: str, depth: int, usage: Usage, cost: float | None, reserved_usd: float = 0.0
    ) -> None:
        """Book a made call (successful or failed for good) against its slot."""
        for ledger in self.chain():
            ledger.in_flight -= 1
            ledger.reserved_usd = max(0.0, ledger.reserved_usd - reserved_usd)
            ledger.spent_usd += cost or 0.0
            ledger.book.add(model, depth, usage, cost)

    def usage_dict(self) -> dict[str, Any]:
        out = self.book.to_dict()
        out["wall_time_s"] = round(time.monotonic() - self.started, 3)
        return out


class SharedBudget(Protocol):
    """Limits a run shares with other runs (a batch's, see rlmx.batch): asked before each of the run's
    model calls, after its own ledger, and told how the call went.

    `reserve` raises `BudgetExhausted` when a shared limit forbids the call; `final=True` is the forced
    final answer, which takes the reservation the run was given when it was admitted. `settle` gets the
    grant back with what the call used (`made=False`: no request was sent, e.g. a cache hit)."""

    @property
    def prices_calls(self) -> bool:
        """True when the shared limits include a cost budget: every call then needs a cost estimate."""
        ...

    async def reserve(
        self, *, est_tokens: int, est_cost_usd: float | None, final: bool, final_reserve_usd: float
    ) -> Any: ...

    def settle(self, grant: Any, *, tokens: int, cost_usd: float | None, made: bool) -> None: ...


def budget_message(limit: LimitReason, limits: Limits, scope: str = "") -> str:
    detail = {
        "max_llm_calls": f"max_llm_calls={limits.max_llm_calls} reached (the last call is kept for the final answer)",
        "max_total_tokens": f"max_total_tokens={limits.max_total_tokens} reached",
        "timeout": f"timeout_s={limits.timeout_s} reached",
        "max_cost_usd": f"max_cost_usd={limits.max_cost_usd} reached",
    }.get(limit.removeprefix("batch_"), limit)
    return f"budget exhausted: {scope}{detail}; no more sub-calls can be made, answer from what you have"


def _earliest(a: float | None, b: float | None) -> float | None:
    """The smaller of two optional figures (None: no bound)."""
    return b if a is None else a if b is None else min(a, b)
