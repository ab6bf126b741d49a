"""Options shared by `rlmx serve` and `rlmx mcp`: how their run profiles are chosen, the port, the log level."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rlmx.serve.profiles import Profile

Model = Annotated[
    str | None,
    typer.Option(
        help="Root model of a single profile (default: the config's profiles, else the model rlmx ask "
        "would use: $RLMX_MODEL, the config file, a provider whose key is set, the embedded demo model)."
    ),
]
SubModel = Annotated[str | None, typer.Option(help="Model for sub-calls and child RLMs.")]
BaseUrl = Annotated[str | None, typer.Option(help="Base URL of an OpenAI-compatible endpoint.")]
ProfilesFile = Annotated[
    Path | None,
    typer.Option(
        "--profiles", help="TOML file of profiles (one profiles.NAME table each); see docs/serve.md."
    ),
]
MaxDepth = Annotated[
    int | None, typer.Option(help="Default profile: 0 no sub-calls, 1 plain, 2+ child RLMs. [default: 1]")
]
MaxIterations = Annotated[int | None, typer.Option(help="Default profile: turns per RLM. [default: 30]")]
MaxLlmCalls = Annotated[int | None, typer.Option(help="Default profile: model calls per run. [default: 200]")]
MaxCostUsd = Annotated[float | None, typer.Option(help="Default profile: USD per run.")]
Timeout = Annotated[float | None, typer.Option(help="Default profile: seconds per run.")]
Port = Annotated[
    int,
    typer.Option(min=0, max=65535, help="Port, 1-65535 (0: any free port; the URL is printed)."),
]
ConfigFile = Annotated[
    Path | None,
    typer.Option("--config", help="A config file read after ./rlmx.toml (TOML); see docs/providers.md."),
]


LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def check_log_level(value: str) -> str:
    if value.lower() not in LOG_LEVELS:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(LOG_LEVELS)}")
    return value.lower()


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
) -> dict[str, Profile]:
    """The profiles to offer, with every model resolved now: a missing key or an unknown provider fails at
    start-up, not at the first request. A note on how the models were chosen goes to stderr."""
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
        },
    )
    if note:
        sys.stderr.write(note + "\n")
    for profile in profiles.values():
        profile.models()
    return dict(profiles)
