"""The folders rlmx keeps its own files in, decided in one place.

Each follows the XDG base directories, with the usual fallback under the home folder when the variable
is unset or empty:

    state   $XDG_STATE_HOME/rlmx   (~/.local/state/rlmx)   traces: traces/, serve-traces/, mcp-traces/
    cache   $XDG_CACHE_HOME/rlmx   (~/.cache/rlmx)         responses.sqlite; search/ ($RLMX_CACHE_DIR/search)
    config  $XDG_CONFIG_HOME/rlmx  (~/.config/rlmx)        config.toml

Nothing here creates a folder: the code that writes a file makes its folder when it needs it.
"""

from __future__ import annotations

import os
from pathlib import Path

SEARCH_CACHE_ENV = "RLMX_CACHE_DIR"  # moves the search indexes' cache folder (only that one)


def _base(variable: str, *fallback: str) -> str:
    return os.environ.get(variable) or os.path.join(os.path.expanduser("~"), *fallback)


def state_dir() -> Path:
    return Path(_base("XDG_STATE_HOME", ".local", "state")) / "rlmx"


def cache_dir() -> Path:
    return Path(_base("XDG_CACHE_HOME", ".cache")) / "rlmx"


def config_dir() -> Path:
    return Path(_base("XDG_CONFIG_HOME", ".config")) / "rlmx"


def trace_dir(kind: str | None = None) -> Path:
    """Where runs write their traces: `rlmx ask`'s and the library's (no `kind`), or a server's folder of
    its own beside them (`kind` "serve" or "mcp": `serve-traces`, `mcp-traces`)."""
    return state_dir() / ("traces" if kind is None else f"{kind}-traces")


def user_config_path() -> Path:
    return config_dir() / "config.toml"


def response_cache_path() -> Path:
    """The model responses cache's default file (`--cache`, `RLM(cache=True)`)."""
    return cache_dir() / "responses.sqlite"


def search_cache_dir() -> str:
    """Where `search` and the pre-filter may keep their indexes: $RLMX_CACHE_DIR/search, else the cache
    folder's search/. A str: it travels to the worker in the context payload's options."""
    base = os.environ.get(SEARCH_CACHE_ENV) or os.path.join(_base("XDG_CACHE_HOME", ".cache"), "rlmx")
    return os.path.join(base, "search")
