"""`rlmx view TRACE.jsonl [-o report.html] [--open]`: the trace as one self-contained HTML report;
`rlmx view --last` renders the newest trace in the default trace folder."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    app.command(name="view")(view)


def view(
    trace: Annotated[
        Path | None,
        typer.Argument(help="A JSONL trace written by rlmx (see `rlmx ask --trace`).", metavar="TRACE"),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Where to write the report (default: TRACE.html).")
    ] = None,
    run: Annotated[
        int, typer.Option(help="Which run of a file holding several (0 = first, -1 = last).")
    ] = -1,
    open_: Annotated[bool, typer.Option("--open", help="Open the report in the default browser.")] = False,
    last: Annotated[
        bool, typer.Option("--last", help="The newest trace in the default trace folder (`rlmx traces`).")
    ] = False,
) -> None:
    """Write the trace's summary, timeline and nested call tree as one HTML file (works offline)."""
    from rlmx.errors import ConfigError
    from rlmx.view import write_report

    if last and trace is not None:
        raise ConfigError("pass a TRACE file or --last, not both")
    if last:
        trace = newest_trace()
    if trace is None:
        raise ConfigError("pass a TRACE file (the .jsonl path `rlmx ask` printed) or --last")
    if trace.is_dir():
        raise ConfigError(f"{trace} is a folder; pass one .jsonl trace file in it")
    if not trace.is_file():
        raise ConfigError(f"no trace file at {trace}; pass the .jsonl path that `rlmx ask` printed")
    try:
        target = write_report(trace, output, run=run)
    except UnicodeDecodeError as exc:  # a binary file (an image, an archive, a compressed trace)
        raise ConfigError(
            f"{trace} is not a JSONL trace (byte {exc.start} is not UTF-8 text); "
            "pass the .jsonl path that `rlmx ask` printed"
        ) from None
    sys.stderr.write(f"[rlmx] report written to {target}\n")
    typer.echo(str(target))
    if open_:
        import webbrowser

        if not webbrowser.open(target.resolve().as_uri()):
            sys.stderr.write(f"[rlmx] could not open a browser; open {target} yourself\n")


def newest_trace() -> Path:
    """The newest trace in the default trace folder (by when its run started)."""
    from rlmx.errors import ConfigError
    from rlmx.paths import trace_dir
    from rlmx.trace.catalog import scan

    infos = scan(trace_dir())
    if not infos:
        raise ConfigError(f"no traces in {trace_dir()}; run `rlmx ask` first or pass a TRACE file")
    return infos[0].path
