"""The official limits: what rlmx's run is given (`run_limits`), and the official exception a run that a
limit stopped raises (`raise_for`), with the official's fields and messages."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from rlmx.compat.rlms.utils.exceptions import (
    BudgetExceededError,
    ErrorThresholdExceededError,
    TimeoutExceededError,
    TokenLimitExceededError,
)
from rlmx.engine.dialect import TurnLimits
from rlmx.errors import InvalidSettings
from rlmx.limits import MAX_DEPTH_ALLOWED, Limits

if TYPE_CHECKING:
    from rlmx.compat.rlms.clients import Backend
    from rlmx.compat.rlms.core.trajectory import Trajectory


def run_limits(rlm: Any, root: Backend) -> tuple[Limits, TurnLimits]:
    """rlmx's `Limits` (depth, turns, concurrency, output cap; no call limit, as officially) and the
    limits the strict dialect checks between turns (time, errors, budget, tokens)."""
    depth = rlm.max_depth - rlm.depth
    if depth > MAX_DEPTH_ALLOWED:
        raise InvalidSettings(f"max_depth - depth must be <= {MAX_DEPTH_ALLOWED} under rlmx, not {depth}")
    if rlm.max_iterations < 1:
        raise InvalidSettings("max_iterations must be >= 1")
    limits = Limits(
        max_depth=depth,
        max_iterations=rlm.max_iterations,
        max_llm_calls=sys.maxsize,
        max_output_tokens=root.max_output_tokens,
        max_concurrent_children=max(1, rlm.max_concurrent_subcalls),
        final_answer_timeout_s=root.options.timeout_s,  # the final call waits as long as any other
    )
    turns = TurnLimits(
        timeout_s=rlm.max_timeout,
        max_errors=rlm.max_errors,
        max_cost_usd=rlm.max_budget,
        max_total_tokens=rlm.max_tokens,
    )
    return limits, turns


def raise_for(rlm: Any, result: Any, trajectory: Trajectory, elapsed: float) -> None:
    """Raise the official exception of the limit that stopped `result`'s run (nothing otherwise).
    `partial_answer` is the root's last reply before the turn that passed the limit, as officially."""
    replies = trajectory.replies()
    usage = result.usage
    turn = result.iterations
    if result.stopped_by == "timeout":
        timeout = float(rlm.max_timeout or 0.0)
        raise TimeoutExceededError(
            elapsed=elapsed,
            timeout=timeout,
            partial_answer=replies[-1] if replies else None,
            message=f"Timeout exceeded after iteration {turn - 1}: {elapsed:.1f}s of {timeout:.1f}s limit",
        )
    earlier = replies[-2] if len(replies) >= 2 else None
    if result.stopped_by == "max_errors":
        raise ErrorThresholdExceededError(
            error_count=rlm.max_errors,
            threshold=rlm.max_errors,
            last_error=trajectory.last_error(),
            partial_answer=earlier,
            message=f"Error threshold exceeded: {rlm.max_errors} consecutive errors (limit: {rlm.max_errors})",
        )
    if result.stopped_by == "max_cost_usd":
        spent = float(usage.get("cost_usd") or 0.0)
        raise BudgetExceededError(
            spent=spent,
            budget=rlm.max_budget,
            message=f"Budget exceeded after iteration {turn}: spent ${spent:.6f} of ${rlm.max_budget:.6f} budget",
        )
    if result.stopped_by == "max_total_tokens":
        used = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
        raise TokenLimitExceededError(
            tokens_used=used,
            token_limit=rlm.max_tokens,
            partial_answer=earlier,
            message=f"Token limit exceeded after iteration {turn}: {used:,} of {rlm.max_tokens:,} tokens",
        )
