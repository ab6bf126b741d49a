"""The context: loaders, the `Context` type, the payload the sandbox carries to the worker, the metadata
the root model sees, and the pre-filter.

Imports are lazy: the REPL worker imports `rlmx.context.payload` and nothing heavier.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Context": "rlmx.context.context",
    "ContextPayload": "rlmx.context.payload",
    "LoadOptions": "rlmx.context.sources",
    "Prefilter": "rlmx.context.prefilter",
    "LoadedContext": "rlmx.context.payload",
    "load_payload": "rlmx.context.payload",
    "describe": "rlmx.context.metadata",
}
__all__ = [
    "Context",
    "ContextPayload",
    "LoadOptions",
    "LoadedContext",
    "Prefilter",
    "describe",
    "load_payload",
]

if TYPE_CHECKING:
    from rlmx.context.context import Context
    from rlmx.context.metadata import describe
    from rlmx.context.payload import ContextPayload, LoadedContext, load_payload
    from rlmx.context.prefilter import Prefilter
    from rlmx.context.sources import LoadOptions


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlmx.context' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
