"""Pieces of a run's set-up that `RLM` and sessions share: the executor of a loop they own, and the
warnings about models without a price."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from rlmx.limits import Limits


class UnwaitedExecutor(ThreadPoolExecutor):
    """The default executor of a loop `RLM.run()` owns. Shutting it down never waits for its threads:
    `asyncio.run` would otherwise wait, at its end, for a thread stuck in a call the run abandoned at
    its deadline."""

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=True)


def budget_warnings(unpriced: list[str], limits: Limits) -> list[str]:
    return [unpriced_warning(unpriced, limits)] if unpriced and limits.max_cost_usd is not None else []


def unpriced_warning(models: list[str], limits: Limits, *, refused: bool = False) -> str:
    """One line: which models have no price, what that means for max_cost_usd, and how to fix it."""
    names = ", ".join(models)
    fix = f"give a price with --price {models[0]}=IN,OUT (USD per million tokens) or Pricing(overrides=...)"
    if refused:
        return (
            f"max_cost_usd={limits.max_cost_usd} cannot be enforced: no price is known for {names}; {fix}, "
            "or run anyway with --allow-unknown-price / allow_unpriced=True"
        )
    budget = limits.max_cost_usd
    return f"no price is known for {names}: its calls are not counted against max_cost_usd={budget}"
