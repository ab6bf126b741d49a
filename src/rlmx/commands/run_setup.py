"""What `rlmx ask` and `rlmx chat` share: their run options turned into an `RLM` (through the one
translation layer, rlmx.spec.options) and the loaded context, with every refusal (configuration,
tools, an unusable context) made before any model call."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass
class PreparedRun:
    rlm: Any  # rlmx.rlm.RLM (imported lazily: `rlmx --help` stays light)
    context: Any  # the loaded --context (a Context), or None
    load: Callable[[list[str]], Any]  # loads more context specs the same way (chat's /context)


def prepare_run(values: Mapping[str, Any]) -> PreparedRun:
    """`values`: the command's run options by parameter name (rlmx.commands.run_options)."""
    from rlmx.commands.run_options import cli_terms, run_options
    from rlmx.context.loaders import context_from_specs
    from rlmx.rlm import RLM
    from rlmx.spec.options import build_spec

    options = run_options(values)

    def load(specs: list[str]) -> Any:
        ctx = context_from_specs(
            specs, include=list(options.include), exclude=list(options.exclude), gitignore=options.gitignore
        )
        if ctx is not None and not options.allow_empty_context:
            ctx.check_usable()  # refused here: the skipped-files line would only repeat the refusal
        skipped = ctx.skipped_summary() if ctx is not None else None
        if skipped:
            sys.stderr.write(
                f"rlmx: {cli_terms(skipped)}\n"
            )  # even with --quiet: it explains what the model saw
        return ctx

    built = build_spec(options)
    rlm = RLM.from_spec(built.spec)
    return PreparedRun(rlm, load(values.get("context") or []), load)
