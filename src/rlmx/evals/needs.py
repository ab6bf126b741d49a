"""What a suite needs installed, checked before any item is generated or any model is called: the bm25
baseline needs `bm25s`, the ray executor `ray` (a missing one stops the run, exit 2, naming the extra);
the report's plots need `matplotlib` (a missing one only leaves the plots out of the report)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
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


def check_installed(config: Any, *, terms: Mapping[str, str] | None = None) -> None:
    """Raise a one-line `ConfigError` when what `config` (an `EvalConfig`) asks for is not installed.
    The line names the config's fields (`methods`, `executor`); `terms` maps a field to the caller's
    own name for it (the CLI passes its flags)."""
    said = dict(terms or {})
    if "bm25" in config.methods and not installed("bm25s"):
        asked = f"{said.get('methods', '`methods`')} bm25"
        raise ConfigError(f"{asked} needs bm25s: pip install 'rlmx[evals]' (or leave bm25 out)")
    if "receipts" in config.suite and not installed("PIL"):
        raise ConfigError("the receipts family draws its pictures with Pillow: pip install 'rlmx[images]'")
    if config.executor == "ray" and not installed("ray"):
        asked = f"{said.get('executor', '`executor`')} ray"
        raise ConfigError(f"{asked} needs ray: pip install 'rlmx[ray]' (or run the items locally)")
