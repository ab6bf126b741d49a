"""What a suite needs installed, checked before any item is generated or any model is called: the bm25
baseline needs `bm25s`, the ray executor `ray` (a missing one stops the run, exit 2, naming the extra);
the report's plots need `matplotlib` (a missing one only leaves the plots out of the report)."""

from __future__ import annotations

import importlib.util
from typing import Any

from rlmx.errors import ConfigError

PLOTS_MISSING = "plots skipped: matplotlib is not installed (pip install 'rlmx[evals]')"


def installed(module: str) -> bool:
    """Whether `module` can be imported, found without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # blocked (sys.modules entry None) or a broken parent package
        return False


def plots_available() -> bool:
    return installed("matplotlib")


def check_installed(config: Any, *, cli: bool = False) -> None:
    """Raise a one-line `ConfigError` when what `config` (an `EvalConfig`) asks for is not installed;
    `cli` names the flags of `rlmx eval` instead of the fields."""
    if "bm25" in config.methods and not installed("bm25s"):
        asked = "--baselines bm25" if cli else "the bm25 method"
        leave = "leave bm25 out" + ("" if cli else " of `methods`")
        raise ConfigError(f"{asked} needs bm25s: pip install 'rlmx[evals]' (or {leave})")
    if config.executor == "ray" and not installed("ray"):
        asked = "--executor ray" if cli else "the ray executor"
        raise ConfigError(f"{asked} needs ray: pip install 'rlmx[ray]' (or run the items locally)")
