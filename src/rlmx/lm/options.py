"""`ModelOptions`: how to reach a model beyond its name. Its own module, so that providers and the
registry that names them both import it and neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlmx.lm.ratelimit import RateLimiter
from rlmx.lm.retry import RetryPolicy


@dataclass(frozen=True)
class ModelOptions:
    """What a user may say about how to reach a model, beyond its name.

    `concurrency` bounds the requests in flight per model; `requests_per_minute` / `tokens_per_minute`
    turn on a sliding-window limiter; `retry` bounds the attempts of one logical call. `extra` holds
    provider-specific settings (e.g. `api_version` for azure).
    """

    base_url: str | None = None
    api_key: str | None = None
    concurrency: int = 64  # requests in flight per model; 1,000 sub-calls at 100 ms take ~1.7 s
    timeout_s: float = 600.0
    extra: dict[str, str] = field(default_factory=dict)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None

    def transport(self) -> dict[str, Any]:
        """The keyword arguments every provider's LM takes from these options: concurrency, timeout,
        retry policy and a fresh rate limiter."""
        return {
            "concurrency": self.concurrency,
            "timeout_s": self.timeout_s,
            "retry": self.retry,
            "limiter": self.limiter(),
        }

    def limiter(self) -> RateLimiter | None:
        """A fresh limiter for one model, or None when no per-minute budget is set."""
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            return None
        return RateLimiter(self.requests_per_minute, self.tokens_per_minute)
