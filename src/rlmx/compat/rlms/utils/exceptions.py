"""The official package's limit exceptions (`rlm.utils.exceptions`), raised by `rlmx.compat.rlms.RLM`
where the official raises them, with its fields. They are the official's names, so they derive from
`Exception` as there, not from rlmx's own error base."""

from __future__ import annotations


class BudgetExceededError(Exception):
    """The known cost (provider-reported) passed `max_budget` after a turn."""

    def __init__(self, spent: float, budget: float, message: str | None = None) -> None:
        self.spent = spent
        self.budget = budget
        super().__init__(message or f"Budget exceeded: spent ${spent:.6f} of ${budget:.6f} budget")


class TimeoutExceededError(Exception):
    """`max_timeout` had passed when a turn was about to start."""

    def __init__(
        self, elapsed: float, timeout: float, partial_answer: str | None = None, message: str | None = None
    ) -> None:
        self.elapsed = elapsed
        self.timeout = timeout
        self.partial_answer = partial_answer
        super().__init__(message or f"Timeout exceeded: {elapsed:.1f}s of {timeout:.1f}s limit")


class TokenLimitExceededError(Exception):
    """The tokens used (input + output) passed `max_tokens` after a turn."""

    def __init__(
        self,
        tokens_used: int,
        token_limit: int,
        partial_answer: str | None = None,
        message: str | None = None,
    ) -> None:
        self.tokens_used = tokens_used
        self.token_limit = token_limit
        self.partial_answer = partial_answer
        super().__init__(message or f"Token limit exceeded: {tokens_used:,} of {token_limit:,} tokens")


class ErrorThresholdExceededError(Exception):
    """`max_errors` turns in a row had a block that raised."""

    def __init__(
        self,
        error_count: int,
        threshold: int,
        last_error: str | None = None,
        partial_answer: str | None = None,
        message: str | None = None,
    ) -> None:
        self.error_count = error_count
        self.threshold = threshold
        self.last_error = last_error
        self.partial_answer = partial_answer
        super().__init__(
            message or f"Error threshold exceeded: {error_count} consecutive errors (limit: {threshold})"
        )


class CancellationError(Exception):
    """The run was interrupted (Ctrl-C)."""

    def __init__(self, partial_answer: str | None = None, message: str | None = None) -> None:
        self.partial_answer = partial_answer
        super().__init__(message or "Execution cancelled by user")


__all__ = [
    "BudgetExceededError",
    "CancellationError",
    "ErrorThresholdExceededError",
    "TimeoutExceededError",
    "TokenLimitExceededError",
]
