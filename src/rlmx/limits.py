"""Settings objects: small, frozen, validated."""

from __future__ import annotations

from dataclasses import dataclass

STOP_REASONS = (
    "final",
    "max_iterations",
    "max_llm_calls",
    "max_total_tokens",
    "max_cost_usd",
    "timeout",
    "error",
)


@dataclass(frozen=True)
class Limits:
    """Bounds of a run.

    `max_iterations` is per RLM (each child gets its own turns). `max_llm_calls`, `max_total_tokens`,
    `max_cost_usd` and `timeout_s` cover the whole tree through one ledger. One call is always kept for
    the forced final answer. `max_output_tokens` is the per-call output cap sent to the provider.
    """

    max_depth: int = 1
    max_iterations: int = 30
    max_llm_calls: int = 200
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None
    timeout_s: float | None = None
    max_output_tokens: int | None = None
    max_concurrent_children: int = 8
    final_answer_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        checks = [
            (self.max_depth >= 0, "max_depth must be >= 0"),
            (self.max_iterations >= 1, "max_iterations must be >= 1"),
            (self.max_llm_calls >= 1, "max_llm_calls must be >= 1 (one call is kept for the final answer)"),
            (self.max_total_tokens is None or self.max_total_tokens > 0, "max_total_tokens must be > 0"),
            (self.max_cost_usd is None or self.max_cost_usd > 0, "max_cost_usd must be > 0"),
            (self.timeout_s is None or self.timeout_s > 0, "timeout_s must be > 0"),
            (self.max_output_tokens is None or self.max_output_tokens > 0, "max_output_tokens must be > 0"),
            (self.max_concurrent_children >= 1, "max_concurrent_children must be >= 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"Limits: {message}")


@dataclass(frozen=True)
class HistorySettings:
    """When the root history passes `compact_at` of the model's context window, older turns are condensed."""

    compact_at: float = 0.6
    context_window: int | None = None  # tokens; None = known window of the model, or a conservative default
    keep_recent_turns: int = 2
    condensed_output_chars: int = 300

    def __post_init__(self) -> None:
        if not 0.05 <= self.compact_at <= 1.0:
            raise ValueError("HistorySettings: compact_at must be between 0.05 and 1.0")
        if self.keep_recent_turns < 1:
            raise ValueError("HistorySettings: keep_recent_turns must be >= 1")
