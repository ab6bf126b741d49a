"""How a run reaches its batch's `Fleet`: in the same process (local executor) or in a Ray actor (ray
executor), behind one small protocol. `ItemBudget` is the engine's `SharedBudget` for one item's attempt;
`FleetRateLimiter` is a `RateLimiter` whose window is the fleet's."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from rlmx.batch.fleet import BatchLimits, Fleet
from rlmx.engine.ledger import budget_message
from rlmx.errors import BudgetExhausted
from rlmx.limits import Limits
from rlmx.lm.ratelimit import RateLimiter, Reservation


class FleetClient(Protocol):
    """The fleet's operations a worker needs; `settle` and `rate_settle` need no answer."""

    async def reserve(self, item: str, attempt: int, **call: Any) -> tuple[int | None, str | None]: ...

    def settle(self, grant: int, *, tokens: int, cost_usd: float | None, made: bool) -> None: ...

    async def rate_acquire(self, model: str, tokens: int) -> tuple[int | None, float]: ...

    def rate_settle(self, rid: int, tokens: int) -> None: ...


class InProcessFleetClient:
    """The fleet in this process."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    async def reserve(self, item: str, attempt: int, **call: Any) -> tuple[int | None, str | None]:
        return self.fleet.reserve(item, attempt, **call)

    def settle(self, grant: int, *, tokens: int, cost_usd: float | None, made: bool) -> None:
        self.fleet.settle(grant, tokens=tokens, cost_usd=cost_usd, made=made)

    async def rate_acquire(self, model: str, tokens: int) -> tuple[int | None, float]:
        return self.fleet.rate_acquire(model, tokens)

    def rate_settle(self, rid: int, tokens: int) -> None:
        self.fleet.rate_settle(rid, tokens)


class ItemBudget:
    """The batch's limits as one attempt of one item sees them (rlmx.engine.ledger.SharedBudget)."""

    def __init__(self, client: FleetClient, limits: BatchLimits, item: str, attempt: int) -> None:
        self.client = client
        self.limits = limits
        self.item = item
        self.attempt = attempt

    @property
    def prices_calls(self) -> bool:
        return self.limits.max_cost_usd is not None

    async def reserve(
        self, *, est_tokens: int, est_cost_usd: float | None, final: bool, final_reserve_usd: float
    ) -> int:
        grant, refusal = await self.client.reserve(
            self.item,
            self.attempt,
            est_tokens=est_tokens,
            est_cost_usd=est_cost_usd,
            final=final,
            final_reserve_usd=final_reserve_usd,
        )
        if grant is None:
            limit: Any = refusal or "batch_max_llm_calls"
            if final:
                raise BudgetExhausted(limit, "the batch's budget has nothing left for the final answer")
            raise BudgetExhausted(limit, budget_message(limit, self._as_limits(), "batch "))
        return grant

    def _as_limits(self) -> Limits:
        """The batch's limits in the words of a run's, for the message the model reads."""
        return Limits(
            max_llm_calls=self.limits.max_llm_calls or 200,
            max_total_tokens=self.limits.max_total_tokens,
            max_cost_usd=self.limits.max_cost_usd,
        )

    def settle(self, grant: Any, *, tokens: int, cost_usd: float | None, made: bool) -> None:
        if grant is not None:
            self.client.settle(grant, tokens=tokens, cost_usd=cost_usd, made=made)


class FleetRateLimiter(RateLimiter):
    """A model's rate limiter whose window is kept by the fleet: every attempt of every item reserves
    there before it is sent."""

    def __init__(self, client: FleetClient, model: str) -> None:
        super().__init__()
        self.client = client
        self.model = model

    def __repr__(self) -> str:
        return f"FleetRateLimiter({self.model})"

    async def acquire(self, tokens: int = 0) -> Reservation:
        while True:
            rid, wait = await self.client.rate_acquire(self.model, tokens)
            if rid is not None:
                return FleetReservation(rid, tokens)
            self.waited_s += wait
            await asyncio.sleep(wait)

    def settle(self, reservation: Reservation, actual_tokens: int) -> None:
        if isinstance(reservation, FleetReservation) and reservation.rid:
            self.client.rate_settle(reservation.rid, actual_tokens)


class FleetReservation(Reservation):
    __slots__ = ("rid",)

    def __init__(self, rid: int, tokens: int) -> None:
        super().__init__(0.0, tokens)
        self.rid = rid  # the fleet's id of the reservation (0: the model has no limit)
