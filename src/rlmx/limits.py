"""Settings objects: small, frozen, validated."""

from __future__ import annotations

from dataclasses import dataclass

from rlmx.errors import InvalidSettings

MAX_DEPTH_ALLOWED = 8  # each level multiplies calls; deeper trees have shown no gain and cannot be budgeted


@dataclass(frozen=True)
class Limits:
    """Bounds of a run.

    `max_iterations` is per RLM (each child gets its own turns). `max_llm_calls`, `max_total_tokens`,
    `max_cost_usd` and `timeout_s` cover the whole tree through one ledger. One call is always kept for
    the forced final answer. `max_output_tokens` is the per-call output cap sent to the provider.

    `timeout_s` is a hard deadline for the whole run: the forced final answer gets the last
    `final_reserve_s` of it (default min(15 s, 25% of `timeout_s`)), not time after it.
    `final_answer_timeout_s` bounds the forced final answer only when no `timeout_s` is set.
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
    final_reserve_s: float | None = None
    max_errors: int | None = None  # stop after this many turns in a row whose code raised; None: never

    def __post_init__(self) -> None:
        checks = [
            (self.max_depth >= 0, "max_depth must be >= 0"),
            (
                self.max_depth <= MAX_DEPTH_ALLOWED,
                f"max_depth must be <= {MAX_DEPTH_ALLOWED} (each level can multiply the calls of the one "
                "above; 1-3 covers the tasks RLMs are used for)",
            ),
            (self.max_iterations >= 1, "max_iterations must be >= 1"),
            (self.max_llm_calls >= 1, "max_llm_calls must be >= 1 (one call is kept for the final answer)"),
            (self.max_total_tokens is None or self.max_total_tokens > 0, "max_total_tokens must be > 0"),
            (self.max_cost_usd is None or self.max_cost_usd > 0, "max_cost_usd must be > 0"),
            (self.timeout_s is None or self.timeout_s > 0, "timeout_s must be > 0"),
            (self.max_output_tokens is None or self.max_output_tokens > 0, "max_output_tokens must be > 0"),
            (self.max_concurrent_children >= 1, "max_concurrent_children must be >= 1"),
            (self.final_answer_timeout_s > 0, "final_answer_timeout_s must be > 0"),
            (self.max_errors is None or self.max_errors >= 1, "max_errors must be >= 1 (or None: no limit)"),
            (
                self.final_reserve_s is None
                or (
                    self.final_reserve_s >= 0
                    and (self.timeout_s is None or self.final_reserve_s < self.timeout_s)
                ),
                "final_reserve_s must be >= 0 and less than timeout_s",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise InvalidSettings(f"Limits: {message}")

    def final_reserve(self) -> float:
        """Seconds at the end of `timeout_s` kept for the forced final answer (0 without a timeout)."""
        if self.timeout_s is None:
            return 0.0
        if self.final_reserve_s is not None:
            return self.final_reserve_s
        return min(15.0, 0.25 * self.timeout_s)


@dataclass(frozen=True)
class HistorySettings:
    """When the root history passes `compact_at` of the model's context window, older turns are condensed."""

    compact_at: float = 0.6
    context_window: int | None = None  # tokens; None = known window of the model, or a conservative default
    keep_recent_turns: int = 2
    condensed_output_chars: int = 300

    def __post_init__(self) -> None:
        if not 0.05 <= self.compact_at <= 1.0:
            raise InvalidSettings("HistorySettings: compact_at must be between 0.05 and 1.0")
        if self.keep_recent_turns < 1:
            raise InvalidSettings("HistorySettings: keep_recent_turns must be >= 1")
