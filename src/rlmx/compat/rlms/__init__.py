"""The official RLM package's public API (`rlms` 0.1.3, imported as `rlm`) over rlmx:

    from rlmx.compat.rlms import RLM                 # was: from rlm import RLM
    from rlmx.compat.rlms.logger import RLMLogger    # was: from rlm.logger import RLMLogger

Model code runs in rlmx's isolated sandbox; see docs/migrating-from-rlms.md for what differs."""

from rlmx.compat.rlms.core.rlm import RLM
from rlmx.compat.rlms.logger import RLMLogger
from rlmx.compat.rlms.utils.exceptions import (
    BudgetExceededError,
    CancellationError,
    ErrorThresholdExceededError,
    TimeoutExceededError,
    TokenLimitExceededError,
)

__all__ = [
    "RLM",
    "BudgetExceededError",
    "CancellationError",
    "ErrorThresholdExceededError",
    "RLMLogger",
    "TimeoutExceededError",
    "TokenLimitExceededError",
]
