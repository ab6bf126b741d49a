"""The sub-commands of `rlmx`. Each module defines `register(app)` and imports heavy things lazily; the
options they share are declared once, in `rlmx.commands.options`.

Also the help as a user reads it: `RlmxTyper` makes every command show flags as plain flags (no
`<bool>` value placeholder), arguments as `QUESTION` in the usage line (not `{question}`), and each
paragraph of a docstring or help text as one line the terminal wraps (`paragraphs`)."""

from __future__ import annotations

import inspect
import re
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from rlmx.commands.options import fill_in_defaults

# in the order `rlmx --help` lists them
COMMAND_MODULES = (
    "ask",
    "chat",
    "batch",
    "view",
    "traces",
    "serve",
    "mcp",
    "eval",
    "providers",
    "prompts",
    "doctor",
    "scripted_server",
)

_BRACED = re.compile(r"^\{(.+)\}(\.\.\.)?$")


def _plain_flags(params: list[Any]) -> list[Any]:
    """Flags take no value, so their help shows none: an empty metavar replaces the `<bool>` type."""
    for param in params:
        if getattr(param, "is_flag", False) and getattr(param, "metavar", "") is None:
            param.metavar = ""
    return params


def _plain_usage(pieces: list[str]) -> list[str]:
    """`{QUESTION}` -> `QUESTION`: a required argument is written as itself, optional ones keep [ ]."""
    out = []
    for piece in pieces:
        match = _BRACED.match(piece)
        out.append(f"{match.group(1)}{match.group(2) or ''}" if match else piece)
    return out


def paragraphs(text: str | None) -> str | None:
    """A docstring as the help shows it: each paragraph (blank lines apart) on one line, so the terminal
    wraps it at its width rather than at the source's line breaks; the blank lines stay."""
    if not text:
        return text
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(text).split("\n\n") if p.strip())


def _reflowed(command: Any) -> None:
    command.help = paragraphs(command.help)
    command.epilog = paragraphs(command.epilog)
    for param in command.params:
        if getattr(param, "help", None):
            param.help = paragraphs(param.help)


class RlmxCommand(TyperCommand):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        fill_in_defaults(self.params)
        _reflowed(self)

    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_flags(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _plain_usage(super().collect_usage_pieces(ctx))


class RlmxGroup(TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _reflowed(self)

    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_flags(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _plain_usage(super().collect_usage_pieces(ctx))


class RlmxTyper(typer.Typer):
    """A Typer app whose group and commands render their help with the classes above."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", RlmxGroup)
        super().__init__(**kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", RlmxCommand)
        return super().command(*args, **kwargs)
