"""`rlmx prompts list` and `rlmx prompts show NAME`: the prompt profiles, filled for a sample run."""

from __future__ import annotations

from typing import Annotated

import typer

from rlmx.commands import RlmxTyper
from rlmx.spec.options import read_append

PROFILES = {
    "rlmx": "the default: FINAL / FINAL_VAR and the answer dict, one message per turn with the calls left",
    "official": "the official RLM repository's contract: the answer dict only, `Turn i/N:` messages, "
    "`REPL variables: [...]` feedback, only ```repl blocks run (for checkpoints trained on it)",
}


def register(app: typer.Typer) -> None:
    group = RlmxTyper(help="The prompt profiles a run can use (--prompt).", no_args_is_help=True)
    group.command(name="list")(list_profiles)
    group.command(name="show")(show_profile)
    app.add_typer(group, name="prompts")


def list_profiles() -> None:
    """Name every built-in profile with what it is for."""
    for name, about in PROFILES.items():
        typer.echo(f"{name:9} {about}")
    typer.echo("A template file of your own also works: --prompt PATH (see `rlmx prompts show rlmx`).")


def show_profile(
    name: Annotated[str, typer.Argument(help="rlmx, official, or a template file's path.", metavar="NAME")],
    system_prompt_append: Annotated[
        str, typer.Option(help="Text added to the system prompt (as `rlmx ask --system-prompt-append`).")
    ] = "",
) -> None:
    """Print a profile filled for a sample run: the system prompt, the opening message, the first turn's
    message and the forced final request."""
    from rlmx.engine.profiles import PromptProfile, sample

    profile = PromptProfile.of(name, append=read_append(system_prompt_append))
    parts = sample(profile)
    typer.echo(f"# profile {profile.name} ({profile.dialect} message shapes)\n")
    typer.echo(f"## system\n{parts['system']}\n")
    typer.echo(f"## first user message\n{parts['opening']}\n")
    if parts["turn"]:
        typer.echo(f"## before each turn (the first shown)\n{parts['turn']}\n")
    typer.echo(f"## at a limit\n{parts['forced_final']}")
