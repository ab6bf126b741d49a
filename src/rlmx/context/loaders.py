"""Turning what a user points at (text, files, folders, stdin) into a context, for the CLI and scripts.

The work happens in `rlmx.context.context.Context` (the scan) and `rlmx.context.payload` (the reading);
these are the short forms.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO

from rlmx.context.context import Context


def context_from_specs(
    specs: Sequence[str],
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    gitignore: bool = True,
    stdin: IO[str] | None = None,
) -> Context | None:
    """A Context for `--context` arguments (files, folders, "-"), or None when there are none. `stdin`
    replaces standard input for "-" (tests); a FIFO, socket or device named directly is a ConfigError."""
    if not specs:
        return None
    return Context.from_paths(list(specs), include=include, exclude=exclude, gitignore=gitignore, stdin=stdin)
