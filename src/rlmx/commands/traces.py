"""`rlmx traces [--limit N] [--json]` lists the recent runs' traces in the trace folder, newest first;
`rlmx traces prune --older-than 30d | --keep N [--dry-run]` removes old ones. Nothing is ever pruned
automatically. A file still being written is never removed, and a session's questions go together."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from rlmx.commands import RlmxTyper

DIR_HELP = "The trace folder (default: $XDG_STATE_HOME/rlmx/traces, where `rlmx ask` writes)."


def register(app: typer.Typer) -> None:
    group = RlmxTyper(
        help="List the recent runs' traces, newest first (`rlmx traces prune` removes old ones; "
        "nothing is pruned automatically).",
        invoke_without_command=True,
    )
    group.callback()(list_traces)
    group.command(name="prune")(prune)
    app.add_typer(group, name="traces")


def _folder(folder: Path | None) -> Path:
    from rlmx.paths import trace_dir

    return folder if folder is not None else trace_dir()


def footer(folder: Path, count: int, size: int) -> str:
    from rlmx.trace.catalog import human_size

    return (
        f"{count} trace{'' if count == 1 else 's'}, {human_size(size)} in {folder} "
        "(none are pruned automatically: `rlmx traces prune`)"
    )


def list_traces(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many runs to list.", min=1)] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array of the runs instead.")] = False,
    folder: Annotated[Path | None, typer.Option("--dir", help=DIR_HELP, metavar="DIR")] = None,
) -> None:
    """When each run started, its question's head, how it stopped, its cost and its file."""
    if ctx.invoked_subcommand is not None:
        return
    from rlmx.trace.catalog import scan

    where = _folder(folder)
    infos = scan(where)
    if as_json:
        typer.echo(json.dumps([info.to_dict() for info in infos[:limit]], indent=2))
        return
    if not infos:
        typer.echo(f"no traces in {where}")
    for info in infos[:limit]:
        when = datetime.fromtimestamp(info.when).strftime("%Y-%m-%d %H:%M")
        question = " ".join(info.question.split())
        question = question if len(question) <= 50 else question[:49] + "…"
        stopped = info.stopped_by or ("running" if info.in_progress else "no run_end")
        cost = "cost unknown" if info.cost_usd is None else f"${info.cost_usd:.4f}"
        typer.echo(f"{when}  {question or '(no question)':50}  {stopped:12}  {cost:12}  {info.path}")
    typer.echo(footer(where, len(infos), sum(info.size for info in infos)))


def prune(
    older_than: Annotated[
        str | None,
        typer.Option(
            help="Remove traces last written longer ago than this (30d, 12h, 90m, 2w).", metavar="AGE"
        ),
    ] = None,
    keep: Annotated[
        int | None, typer.Option(help="Keep only the newest N runs (a session counts as one).", min=0)
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only print what would be removed.")] = False,
    folder: Annotated[Path | None, typer.Option("--dir", help=DIR_HELP, metavar="DIR")] = None,
) -> None:
    """Remove old traces: never one still being written, and a session's questions all together."""
    from rlmx.errors import ConfigError
    from rlmx.trace.catalog import human_size, parse_age, scan, to_prune

    if older_than is None and keep is None:
        raise ConfigError("say which traces to remove: --older-than AGE (e.g. 30d) and/or --keep N")
    try:
        age = None if older_than is None else parse_age(older_than)
    except ValueError as exc:
        raise ConfigError(f"--older-than: {exc}") from None
    where = _folder(folder)
    infos = scan(where)
    chosen = to_prune(infos, older_than_s=age, keep=keep, now=time.time())
    freed = 0
    for info in chosen:
        if not dry_run:
            try:
                info.path.unlink()
            except FileNotFoundError:
                continue
        freed += info.size
        typer.echo(f"{'would remove' if dry_run else 'removed'} {info.path}")
    verb = "would free" if dry_run else "freed"
    typer.echo(f"{len(chosen)} of {len(infos)} traces, {verb} {human_size(freed)}")
