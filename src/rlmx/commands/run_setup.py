"""What `rlmx ask` and `rlmx chat` share: their options turned into an `RLM`, the loaded context and
the output schema, with every refusal (configuration, tools, an unusable context) made before any
model call."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlmx.recipe import build_rlm


@dataclass
class PreparedRun:
    rlm: Any  # rlmx.rlm.RLM (imported lazily: `rlmx --help` stays light)
    context: Any  # the loaded --context (a Context), or None
    load: Callable[[list[str]], Any]  # loads more context specs the same way (chat's /context)
    output: Any  # the --output-schema, or None


def prepare_run(o: dict[str, Any]) -> PreparedRun:
    """`o`: the command's options by name (its `locals()` at entry)."""
    from rlmx.context.loaders import context_from_specs

    def load(specs: list[str]) -> Any:
        ctx = context_from_specs(
            specs, include=o["include"], exclude=o["exclude"], gitignore=not o["no_gitignore"]
        )
        if ctx is not None and not o["allow_empty_context"]:
            ctx.check_usable()  # refused here: the skipped-files line would only repeat the refusal
        skipped = ctx.skipped_summary() if ctx is not None else None
        if skipped:
            sys.stderr.write(f"rlmx: {skipped}\n")  # even with --quiet: it explains what the model saw
        return ctx

    built = build_rlm(o, load_context=lambda: load(o["context"]))
    return PreparedRun(built.rlm, built.context, load, built.output)
