"""The run profiles of `rlmx serve` and `rlmx mcp`, from their options and the config files."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlmx.lm.sampling import Sampling
    from rlmx.serve.profiles import Profile


def load_profiles(
    config_file: Path | None,
    *,
    profiles_file: Path | None,
    model: str | None,
    sub_model: str | None,
    base_url: str | None,
    name: str | None,
    max_depth: int | None,
    max_iterations: int | None,
    max_llm_calls: int | None,
    max_cost_usd: float | None,
    timeout: float | None,
    sampling: Sampling | None = None,
    sub_sampling: Sampling | None = None,
    max_errors: int | None = None,
    prompt: str | None = None,
    system_prompt_append: str | None = None,
    tools: list[str] | None = None,
) -> dict[str, Profile]:
    """The profiles to offer, with every model and prompt profile resolved now: a missing key, an unknown
    provider or an unreadable prompt template fails at start-up, not at the first request. A note on how
    the models were chosen goes to stderr. `system_prompt_append` is the option's value (`@FILE` reads
    the file). `tools`: the --tools given, added to every profile's (their modules are imported now)."""
    from rlmx.commands.prompts import read_append
    from rlmx.config import load_config
    from rlmx.serve.profiles import choose_profiles

    profiles, note = choose_profiles(
        load_config(config_file),
        profiles_file=profiles_file,
        model=model,
        sub_model=sub_model,
        base_url=base_url,
        name=name,
        limits={
            "max_depth": max_depth,
            "max_iterations": max_iterations,
            "max_llm_calls": max_llm_calls,
            "max_cost_usd": max_cost_usd,
            "timeout_s": timeout,
            "max_errors": max_errors,
        },
        sampling=sampling,
        sub_sampling=sub_sampling,
        prompt=prompt,
        system_prompt_append=None if system_prompt_append is None else read_append(system_prompt_append),
        tools=tuple(tools or ()),
    )
    if note:
        sys.stderr.write(note + "\n")
    for profile in profiles.values():
        profile.prompt_profile()
        profile.models()
        profile.tool_sets()
    return dict(profiles)
