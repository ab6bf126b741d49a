"""One error base for rlmx. Recoverable code errors go to the model; these are the loud ones."""

from __future__ import annotations

from rlmx.outcomes import LimitReason


class RLMError(Exception):
    """Base class of every error rlmx raises on purpose."""


class ConfigError(RLMError):
    """Bad usage or configuration (unknown provider, missing key, bad file). CLI exit code 2."""


class InvalidSettings(ConfigError, ValueError):
    """A settings object (`Limits`, `HistorySettings`, `SandboxSettings`, `RetryPolicy`, ...) was given a
    value it cannot take. A `ValueError` too, so callers that catch that keep working; a `ConfigError`,
    so the CLI reports it in one line with exit 2 without translating it."""


class EmptyContext(ConfigError):
    """A context was given but holds no usable text (binary or empty files, nothing matched, empty
    stdin). Refused before any model call unless `allow_empty_context` / `--allow-empty-context`."""


class ModelError(RLMError):
    """A model call failed for good (after its retries)."""

    def __init__(
        self,
        message: str,
        *,
        attempts: int = 1,
        status: int | None = None,
        attempt_errors: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.status = status
        self.attempt_errors = attempt_errors  # the error of every failed attempt, in order


class TransientModelError(ModelError):
    """A model call failure that is worth retrying (429, 5xx, timeout, malformed reply)."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after


class DeadlineExceeded(ModelError):
    """A model call did not finish before the run's deadline (`timeout_s`), retries included."""


class SandboxError(RLMError):
    """The REPL machinery failed (worker could not start, protocol violation)."""


class ProtocolViolation(SandboxError):
    """The worker sent something the wire protocol does not allow."""


class SandboxRefused(SandboxError):
    """The worker turned a request down (a value it could not take, a definition it could not make) and
    goes on; the REPL is not lost."""


class SandboxUnavailable(SandboxError):
    """The default sandbox cannot isolate model code on this machine, so it refuses to run it."""


class BudgetExhausted(RLMError):
    """A limit forbids another model call."""

    def __init__(self, limit: LimitReason, message: str) -> None:
        super().__init__(message)
        self.limit: LimitReason = limit


class RealProviderForbidden(RLMError):
    """A test run tried to reach a real model provider."""
