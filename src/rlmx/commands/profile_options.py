"""Options shared by `rlmx serve` and `rlmx mcp`: how their run profiles are chosen."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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
ConfigFile = Annotated[
    Path | None,
    typer.Option("--config", help="A config file read after ./rlmx.toml (TOML); see docs/providers.md."),
]
