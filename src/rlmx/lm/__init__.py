"""Model access: the LM protocol and its optional capabilities (`BaseLM`), the providers, the registry
that turns `provider:model` into an LM, and the real-provider guard (`check_endpoint`) an LM class of
your own can call."""

from rlmx.lm.base import LM, BaseLM, CallSettings, LMResponse, Usage, with_capabilities
from rlmx.lm.guard import check_endpoint, is_loopback

__all__ = [
    "LM",
    "BaseLM",
    "CallSettings",
    "LMResponse",
    "Usage",
    "check_endpoint",
    "is_loopback",
    "with_capabilities",
]
