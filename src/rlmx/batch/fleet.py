"""One ledger and one rate limiter per model for a whole batch (the "fleet" of its runs).

`Fleet` is plain synchronous state. The local executor calls it in its own process; the ray executor
keeps the one instance in a Ray actor that every worker asks (`rlmx.batch.ray_executor`). Either way each
model call anywhere in the batch reserves here before it is sent, as a run's own ledger does:

- an item is *admitted* before it starts and then holds one call (and the estimated cost of its forced
  final answer) for that answer, so that a limit reached mid-batch still lets every running item answer,
  and the batch's bound is the budget itself;
- an ordinary call must fit beside the calls in flight, the holds and the settled calls; the first call
  a batch limit refuses marks the limit *reached*: from then on no ordinary call is granted and no item
  is admitted (runs in flight get their forced final answer, items not started are written as such);
- an attempt lost with its worker (`abandon`) keeps its unsettled calls booked at their estimates, so the
  ledger never counts fewer calls than the provider served.

Rate limits: one sliding-window limiter per model (`RateLimiter`), asked before every attempt of a call.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from rlmx.errors import ConfigError
from rlmx.lm.ratelimit import RateLimiter, Reservation
from rlmx.outcomes import BatchLimitReason

RATE_SLACK_S = 0.25  # a reservation counts this much beyond its window: requests arrive after their grant


@dataclass(frozen=True)
class BatchLimits:
    """Bounds of a whole batch, beside each item's own `Limits`; None: no bound."""

    max_llm_calls: int | None = None
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None

    def __post_init__(self) -> None:
        if self.max_llm_calls is not None and self.max_llm_calls < 2:
            raise ConfigError(
                "`batch_max_llm_calls` must be >= 2 (an item needs a call and its final answer)"
            )
        if self.max_total_tokens is not None and self.max_total_tokens < 1:
            raise ConfigError("`batch_max_total_tokens` must be >= 1")
        if self.max_cost_usd is not None and self.max_cost_usd <= 0:
            raise ConfigError("`batch_max_cost_usd` must be > 0")

    @property
    def any(self) -> bool:
        return (self.max_llm_calls, self.max_total_tokens, self.max_cost_usd) != (None, None, None)


@dataclass(frozen=True)
class RateSpec:
    """A model's fleet-wide rate limit: requests and tokens per minute, counted over `window_s`."""

    rpm: int | None = None
    tpm: int | None = None


@dataclass
class _Grant:
    item: str
    attempt: int
    tokens: int
    cost: float
    final: bool


@dataclass
class _Hold:
    reserve_usd: float = 0.0  # the forced final answer's worst case, as the item's root turns update it
    used: bool = False  # the final answer's call took it


@dataclass
class Fleet:
    limits: BatchLimits = field(default_factory=BatchLimits)
    rates: dict[str, RateSpec] = field(default_factory=dict)
    window_s: float = 60.0
    slack_s: float = RATE_SLACK_S
    calls: int = 0  # settled calls (made, or lost with their worker)
    tokens: int = 0
    spent_usd: float = 0.0
    unpriced_calls: int = 0  # made calls whose cost is unknown: the batch's cost is unknown too
    lost_calls: int = 0  # calls of lost attempts, booked at their estimates
    reached: BatchLimitReason | None = None
    refused_admissions: int = 0

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)
        self._grants: dict[int, _Grant] = {}
        self._holds: dict[tuple[str, int], _Hold] = {}
        self._limiters: dict[str, RateLimiter] = {}
        self._reservations: dict[int, tuple[RateLimiter, Reservation]] = {}
        self.started = time.monotonic()
        self.rate_waits = 0

    # -- the ledger --------------------------------------------------------------------------------
    def _in_use(self) -> tuple[int, int, float]:
        """(calls, tokens, USD) taken by calls in flight and the holds of running items."""
        calls = len(self._grants) + sum(1 for hold in self._holds.values() if not hold.used)
        tokens = sum(grant.tokens for grant in self._grants.values())
        usd = sum(grant.cost for grant in self._grants.values())
        usd += sum(hold.reserve_usd for hold in self._holds.values() if not hold.used)
        return calls, tokens, usd

    def admit(self, item: str, attempt: int) -> BatchLimitReason | None:
        """Start an attempt of `item`, holding its final answer's call; the limit that forbids it, else None."""
        refusal = self.reached or self._no_room(extra_calls=2, est_tokens=0, est_cost=0.0)
        if refusal is not None:
            self.refused_admissions += 1
            return refusal
        self._holds[item, attempt] = _Hold()
        return None

    def _over_cost(self, est_cost: float) -> bool:
        budget = self.limits.max_cost_usd
        return budget is not None and self.spent_usd + self._in_use()[2] + est_cost > budget

    def _no_room(self, *, extra_calls: int, est_tokens: int, est_cost: float) -> BatchLimitReason | None:
        limits = self.limits
        calls, tokens, _ = self._in_use()
        if limits.max_llm_calls is not None and self.calls + calls + extra_calls > limits.max_llm_calls:
            return "batch_max_llm_calls"
        if (
            limits.max_total_tokens is not None
            and self.tokens + tokens + est_tokens >= limits.max_total_tokens
        ):
            return "batch_max_total_tokens"
        if self._over_cost(est_cost):
            return "batch_max_cost_usd"
        return None

    def reserve(
        self,
        item: str,
        attempt: int,
        *,
        est_tokens: int,
        est_cost_usd: float | None,
        final: bool,
        final_reserve_usd: float,
    ) -> tuple[int | None, BatchLimitReason | None]:
        """A grant id for one call of `item`, or (None, the batch limit that refuses it)."""
        hold = self._holds.get((item, attempt))
        cost = est_cost_usd or 0.0
        if final and hold is not None and not hold.used:
            hold.used = True  # the held call: its cost must still fit what the others leave
            if self._over_cost(cost):
                hold.used = False
                return None, "batch_max_cost_usd"
        else:
            if hold is not None and not hold.used:
                hold.reserve_usd = final_reserve_usd  # the item's latest estimate of its final answer
            refusal = self.reached or self._no_room(extra_calls=1, est_tokens=est_tokens, est_cost=cost)
            if refusal is not None:
                self.reached = self.reached or refusal
                return None, refusal
        grant = next(self._ids)
        self._grants[grant] = _Grant(item, attempt, est_tokens, cost, final)
        return grant, None

    def settle(self, grant: int, *, tokens: int, cost_usd: float | None, made: bool) -> None:
        """Book a granted call with what it used (`made=False`: never sent, e.g. a cache hit)."""
        found = self._grants.pop(grant, None)
        if found is None:  # its attempt was abandoned meanwhile: booked at its estimate already
            return
        if made:
            self.calls += 1
            self.tokens += tokens
            self.spent_usd += cost_usd or 0.0
            self.unpriced_calls += cost_usd is None
        elif found.final:
            hold = self._holds.get((found.item, found.attempt))
            if hold is not None:
                hold.used = False

    def finish(self, item: str, attempt: int) -> None:
        """The attempt ended (its result reached the driver): its unused hold is given back."""
        self._holds.pop((item, attempt), None)

    def abandon(self, item: str, attempt: int) -> int:
        """The attempt was lost with its worker: its calls in flight are booked at their estimates (the
        provider may have served them) and its hold is given back. Returns the calls so booked."""
        self._holds.pop((item, attempt), None)
        lost = [gid for gid, grant in self._grants.items() if (grant.item, grant.attempt) == (item, attempt)]
        for gid in lost:
            grant = self._grants.pop(gid)
            self.calls += 1
            self.tokens += grant.tokens
            self.spent_usd += grant.cost
        self.lost_calls += len(lost)
        return len(lost)

    # -- rate limits -------------------------------------------------------------------------------
    def _limiter(self, model: str) -> RateLimiter | None:
        spec = self.rates.get(model)
        if spec is None or (spec.rpm is None and spec.tpm is None):
            return None
        if model not in self._limiters:
            self._limiters[model] = RateLimiter(
                spec.rpm, spec.tpm, window_s=self.window_s, slack_s=self.slack_s
            )
        return self._limiters[model]

    def rate_acquire(self, model: str, tokens: int) -> tuple[int | None, float]:
        """(a reservation id, 0) when one more request of `model` fits its window now, else (None, the
        seconds to wait). A model without a limit gets (0, 0)."""
        limiter = self._limiter(model)
        if limiter is None:
            return 0, 0.0
        reservation, wait = limiter.try_acquire(tokens)
        if reservation is None:
            self.rate_waits += 1
            return None, wait
        rid = next(self._ids)
        self._reservations[rid] = (limiter, reservation)
        if len(self._reservations) > 10_000:  # never settled (a lost worker): forget the oldest
            for old in list(self._reservations)[:5_000]:
                del self._reservations[old]
        return rid, 0.0

    def rate_settle(self, rid: int, tokens: int) -> None:
        found = self._reservations.pop(rid, None)
        if found is not None:
            found[0].settle(found[1], tokens)

    # -- reports -----------------------------------------------------------------------------------
    def totals(self) -> dict[str, Any]:
        usd = self._in_use()[2]
        return {
            "calls": self.calls,
            "total_tokens": self.tokens,
            "cost_usd": None if self.unpriced_calls else round(self.spent_usd, 6),
            "lost_calls": self.lost_calls,
            "in_flight_calls": len(self._grants),
            "reserved_usd": round(usd, 6),
            "reached": self.reached,
            "refused_admissions": self.refused_admissions,
            "rate_waits": self.rate_waits,
        }
