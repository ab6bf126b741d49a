"""`rlmx ask QUESTION`: one RLM run over the given context; the answer on stdout, progress on stderr."""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from rlmx.commands.run_options import cli_terms, with_run_options
from rlmx.outcomes import EXIT_INTERRUPTED, exit_code
from rlmx.trace.events import RunStart

if TYPE_CHECKING:
    from rlmx.trace.events import Event


def register(app: typer.Typer) -> None:
    app.command()(ask)


@with_run_options(exclude=("model_concurrency",))
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer.", metavar="QUESTION")],
    **run: Any,
) -> None:
    """Answer QUESTION about the given context with a Recursive Language Model.

    Without --model, the model is $RLMX_MODEL, else the config file's, else the default model of a
    provider whose key is set, else the embedded demo model."""
    from rlmx.commands.run_setup import prepare_run
    from rlmx.display.progress import progress_sink

    prepared = prepare_run(run)
    rlm, ctx = prepared.rlm, prepared.context
    started = RunStarted()
    try:
        with progress_sink(sys.stderr, quiet=run["quiet"]) as sink:
            rlm.on_event = [sink, started]
            result = rlm.run(question, ctx)
    except KeyboardInterrupt:
        where = f"; trace: {started.trace_path}" if started.trace_path else ""
        sys.stderr.write(f"rlmx: interrupted{where}\n")
        exit_now(EXIT_INTERRUPTED)
    exit_now(report(result, as_json=run["as_json"], quiet=run["quiet"]))


class RunStarted:
    """An event sink that remembers where the run's trace goes (for the Ctrl-C line)."""

    trace_path: str | None = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunStart):
            self.trace_path = event.trace_path


def report(result: Any, *, as_json: bool, quiet: bool) -> int:
    """Print a run's outcome and return its exit code. The answer goes to stdout only when there is
    one (with --json the object always prints); a run without one says why in one line on stderr."""
    failed = not result.answered  # RunResult.answered; exit_code() maps the rest
    if as_json:
        typer.echo(json.dumps(result.to_dict(), ensure_ascii=False))
    elif not failed:
        answer = result.answer
        typer.echo(answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False))
    where = f"; trace: {result.trace_path}" if result.trace_path else ""
    turns = f"{result.iterations} turn{'s' if result.iterations != 1 else ''}"
    if failed:
        why = cli_terms(result.error) if result.error else "the run produced no answer"
        how = (
            f"after {turns}"
            if why.startswith("stopped by")
            else f"stopped by {result.stopped_by} after {turns}"
        )
        sys.stderr.write(f"rlmx: error: {why} ({how}{where})\n")
        return exit_code(result.stopped_by, answered=False)
    if not quiet:
        source = (
            ""
            if result.stopped_by == "final"
            else f"; answer from the forced final reply ({result.answer_source})"
        )
        sys.stderr.write(f"[rlmx] stopped by {result.stopped_by} after {turns}{source}{where}\n")
    return exit_code(result.stopped_by, answered=True)


def exit_now(code: int) -> NoReturn:
    """Exit with `code` without waiting for threads the run left behind: a model call abandoned at the
    deadline may still sit in a worker thread (a hung DNS lookup, an in-process model), and the
    interpreter would join it before exiting."""
    sys.stdout.flush()
    sys.stderr.flush()
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        os._exit(code)
    raise typer.Exit(code)
