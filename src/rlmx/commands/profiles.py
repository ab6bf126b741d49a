"""The run profiles of `rlmx serve` and `rlmx mcp`, from their options and the config files."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlmx.serve.profiles import ServedProfile


def load_profiles(
    values: Mapping[str, Any], *, profiles_file: Path | None, name: str | None
) -> dict[str, ServedProfile]:
    """The profiles to offer, each prepared now: a missing key, an unknown provider, an unreadable
    prompt template or a tool that cannot be imported fails at start-up, not at the first request. A
    note on how the models were chosen goes to stderr. `values`: the command's run options by parameter
    name (rlmx.commands.run_options; `system_prompt_append` may be `@FILE`, --tools adds tools to every
    profile)."""
    from rlmx.commands.run_options import run_options
    from rlmx.config import load_config
    from rlmx.serve.profiles import choose_profiles

    options = run_options(values)
    profiles, note = choose_profiles(
        load_config(options.config_file), profiles_file=profiles_file, options=options, name=name
    )
    if note:
        sys.stderr.write(note + "\n")
    for profile in profiles.values():
        profile.prepare()
    return dict(profiles)
