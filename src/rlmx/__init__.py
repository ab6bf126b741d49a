"""rlmx: Recursive Language Models.

The long context lives as a variable in a Python REPL in a separate worker process; the root model sees
only the question and metadata, and answers by writing code that explores, delegates to sub-models,
aggregates, and finishes with FINAL(...).

    from rlmx import RLM, Limits
    result = RLM("openai:gpt-5-mini", sub_model="openai:gpt-5-nano").run("question", context=text)

Imports are lazy so that the REPL worker, which imports `rlmx.sandbox`, starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "RLM": "rlmx.rlm",
    "RunResult": "rlmx.rlm",
    "RunSpec": "rlmx.spec.run",
    "ModelRef": "rlmx.lm.options",
    "Tool": "rlmx.tools",
    "Session": "rlmx.session",
    "AsyncSession": "rlmx.session",
    "SessionClosed": "rlmx.session",
    "Limits": "rlmx.limits",
    "HistorySettings": "rlmx.limits",
    "SandboxSettings": "rlmx.sandbox.base",
    "LM": "rlmx.lm.base",
    "LMResponse": "rlmx.lm.base",
    "Usage": "rlmx.lm.base",
    "CallSettings": "rlmx.lm.base",
    "ModelOptions": "rlmx.lm.registry",
    "register_provider": "rlmx.lm.registry",
    "resolve_model": "rlmx.lm.registry",
    "RLMError": "rlmx.errors",
    "ConfigError": "rlmx.errors",
    "ModelError": "rlmx.errors",
    "SandboxError": "rlmx.errors",
}

__all__ = [
    "LM",
    "RLM",
    "AsyncSession",
    "CallSettings",
    "ConfigError",
    "HistorySettings",
    "LMResponse",
    "Limits",
    "ModelError",
    "ModelOptions",
    "ModelRef",
    "RLMError",
    "RunResult",
    "RunSpec",
    "SandboxError",
    "SandboxSettings",
    "Session",
    "SessionClosed",
    "Tool",
    "Usage",
    "__version__",
    "register_provider",
    "resolve_model",
]

if TYPE_CHECKING:
    from rlmx.errors import ConfigError, ModelError, RLMError, SandboxError
    from rlmx.limits import HistorySettings, Limits
    from rlmx.lm.base import LM, CallSettings, LMResponse, Usage
    from rlmx.lm.options import ModelRef
    from rlmx.lm.registry import ModelOptions, register_provider, resolve_model
    from rlmx.rlm import RLM, RunResult
    from rlmx.sandbox.base import SandboxSettings
    from rlmx.session import AsyncSession, Session, SessionClosed
    from rlmx.spec.run import RunSpec
    from rlmx.tools import Tool


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlmx' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
