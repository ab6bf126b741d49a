"""`ModelOptions`: how to reach a model beyond its name, and how it samples (`rlmx.lm.sampling`). Its own
module, so that providers and the registry that names them both import it and neither imports the
other."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

from rlmx.lm.ratelimit import RateLimiter
from rlmx.lm.retry import RetryPolicy
from rlmx.lm.sampling import (
    REASONING_EFFORTS,
    SAMPLING_KEYS,
    Sampling,
    check_accepted,
    drop_hint,
    refusal_classifier,
    sampling_of,
)

__all__ = [
    "REASONING_EFFORTS",
    "SAMPLING_KEYS",
    "ModelOptions",
    "ModelRef",
    "Sampling",
    "check_accepted",
    "drop_hint",
    "refusal_classifier",
    "sampling_of",
]


@dataclass(frozen=True)
class ModelOptions:
    """What a user may say about how to reach a model, beyond its name.

    `concurrency` bounds the requests in flight per model; `requests_per_minute` / `tokens_per_minute`
    turn on a sliding-window limiter; `retry` bounds the attempts of one logical call. `extra` holds
    provider-specific settings (e.g. `api_version` for azure). `temperature`, `top_p` and
    `reasoning_effort` go into every request (None: not sent); `reasoning_effort` is one of
    `REASONING_EFFORTS`.
    """

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    concurrency: int = 64  # requests in flight per model; 1,000 sub-calls at 100 ms take ~1.7 s
    timeout_s: float = 600.0
    extra: dict[str, str] = field(default_factory=dict)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    reasoning_effort: str | None = None
    # a limiter shared with other model objects, e.g. a batch's fleet-wide one (rlmx.batch); when set,
    # it replaces the per-model limiter that `requests_per_minute` / `tokens_per_minute` would make
    shared_limiter: RateLimiter | None = None
    # the environment variable holding the key, read here when `api_key` is not given: a spec's data
    # names the variable, never the key (rlmx.spec)
    api_key_env: str | None = None
    # whether the model sees images (None: as rlmx.images.vision knows its family); a declaration wins
    vision: bool | None = None

    def __post_init__(self) -> None:
        if self.api_key is None and self.api_key_env:
            object.__setattr__(self, "api_key", os.environ.get(self.api_key_env) or None)
        sampling = Sampling(self.temperature, self.top_p, self.reasoning_effort)  # refuses bad values
        object.__setattr__(self, "reasoning_effort", sampling.reasoning_effort)  # normalised

    def sampling(self) -> Sampling:
        return Sampling(self.temperature, self.top_p, self.reasoning_effort)

    def with_sampling(self, sampling: Sampling) -> ModelOptions:
        """These options with `sampling` instead of their own sampling settings."""
        return replace(self, **{key: getattr(sampling, key) for key in SAMPLING_KEYS})

    def transport(self) -> dict[str, Any]:
        """The keyword arguments every provider's LM takes from these options: concurrency, timeout,
        retry policy, a fresh rate limiter and the sampling settings."""
        return {
            "concurrency": self.concurrency,
            "timeout_s": self.timeout_s,
            "retry": self.retry,
            "limiter": self.limiter(),
            "sampling": self.sampling(),
        }

    def limiter(self) -> RateLimiter | None:
        """A fresh limiter for one model (or the shared one), or None when no per-minute budget is set."""
        if self.shared_limiter is not None:
            return self.shared_limiter
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            return None
        return RateLimiter(self.requests_per_minute, self.tokens_per_minute)


@dataclass(frozen=True)
class ModelRef:
    """A model string and how to reach it (`ModelOptions`): what the translation layer (rlmx.spec) makes of a
    `provider:model` name, its provider's configuration and a role's sampling settings."""

    name: str
    options: ModelOptions = field(default_factory=ModelOptions)
