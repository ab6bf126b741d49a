"""Usage added up: the ledger books every call here, and a trace's usage is recomputed the same way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlmx.lm.base import Usage


def cost_text(cost: float | None) -> str:
    """A cost as progress lines and summaries show it: `$0.0123`, or `cost unknown` (no price known)."""
    return "cost unknown" if cost is None else f"${cost:.4f}"


@dataclass
class UsageTotals:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = 0.0  # None once any call's cost is unknown

    def add(self, usage: Usage, cost: float | None) -> None:
        self.calls += 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cached_tokens += usage.cached_tokens
        self.reasoning_tokens += usage.reasoning_tokens
        self.cost_usd = None if cost is None or self.cost_usd is None else self.cost_usd + cost

    def to_dict(self) -> dict[str, Any]:
        cost = None if self.cost_usd is None else round(self.cost_usd, 8)
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cost_usd": cost,
        }


@dataclass
class UsageBook:
    """Totals for the whole tree, by model and by depth: the shape of `RunResult.usage`."""

    total: UsageTotals = field(default_factory=UsageTotals)
    by_model: dict[str, UsageTotals] = field(default_factory=dict)
    by_depth: dict[int, UsageTotals] = field(default_factory=dict)

    def add(self, model: str, depth: int, usage: Usage, cost: float | None) -> None:
        self.total.add(usage, cost)
        self.by_model.setdefault(model, UsageTotals()).add(usage, cost)
        self.by_depth.setdefault(depth, UsageTotals()).add(usage, cost)

    def to_dict(self) -> dict[str, Any]:
        out = self.total.to_dict()
        out["by_model"] = {name: totals.to_dict() for name, totals in self.by_model.items()}
        out["by_depth"] = {str(depth): totals.to_dict() for depth, totals in sorted(self.by_depth.items())}
        return out
