"""`rlmx chat`: questions one after another in one session (one REPL: what the model's code made for a
question is there for the next). Each line of input is a question; `/context PATH` adds a context
(`context_1`, ...), `/usage` prints the session's usage so far, `/help` lists the commands, `/exit` ends it. On a terminal the
prompt has line editing and history (readline); otherwise each line of stdin is read as it comes, so a
conversation can be scripted. The answers go to stdout, progress and per-question usage to stderr."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import typer

from rlmx.commands.ask import exit_now, report
from rlmx.commands.run_options import cli_terms, with_run_options
from rlmx.errors import ConfigError, RLMError

if TYPE_CHECKING:
    from rlmx.session import Session

COMMANDS = "/context PATH, /usage, /help, /exit"
HELP = {
    "/context PATH": "add PATH (read as --context reads it) as the next context: context_1, ...",
    "/usage": "print the session's usage so far (calls, tokens, cost)",
    "/help": "list these commands",
    "/exit": "end the session (also /quit, or the end of input)",
}


def register(app: typer.Typer) -> None:
    app.command()(chat)


@with_run_options(exclude=("model_concurrency",))
def chat(**run: Any) -> None:
    """Ask questions one after another over the given context, in one session whose REPL keeps the
    variables the model made. Limits apply to each question. Commands: /context PATH, /usage, /help, /exit."""
    from rlmx.commands.run_setup import prepare_run

    prepared = prepare_run(run)
    rlm, ctx, load = prepared.rlm, prepared.context, prepared.load
    with rlm.session(ctx) as session:
        try:
            converse(session, rlm, load, as_json=run["as_json"], quiet=run["quiet"])
        finally:
            sys.stderr.write(f"rlmx: session: {usage_line(session.usage)}\n")
    exit_now(0)


def converse(session: Session, rlm: Any, load: Any, *, as_json: bool, quiet: bool) -> None:
    """The prompt loop: one line, one question (or a command), until /exit or the end of input."""
    from rlmx.display.progress import progress_sink

    for line in lines():
        if line in ("/exit", "/quit"):
            return
        if line == "/help":
            for name, about in HELP.items():
                typer.echo(f"{name:14} {about}")
            continue
        if line == "/usage":
            typer.echo(f"usage: {usage_line(session.usage)}")
            continue
        if line.startswith("/context"):
            path = line[len("/context") :].strip()
            try:
                index = session.add_context(load([path]))
            except (RLMError, OSError) as exc:
                sys.stderr.write(f"rlmx: error: {cli_terms(str(exc))}\n")
                continue
            typer.echo(f"added {path} as context_{index}")
            continue
        if line.startswith("/"):
            sys.stderr.write(f"rlmx: unknown command {line.split()[0]} (commands: {COMMANDS})\n")
            continue
        try:
            with progress_sink(sys.stderr, quiet=quiet) as sink:
                rlm.on_event = [sink]
                result = session.ask(line)
        except KeyboardInterrupt:
            sys.stderr.write("rlmx: interrupted; ask again or /exit\n")
            continue
        except ConfigError as exc:
            sys.stderr.write(f"rlmx: error: {cli_terms(str(exc))}\n")
            continue
        report(result, as_json=as_json, quiet=True)
        if not quiet:
            sys.stderr.write(f"[rlmx] {result.stopped_by}; {usage_line(result.usage)}\n")


def lines() -> Any:
    """The user's lines, stripped; blank ones skipped. A terminal gets a prompt with readline's line
    editing and history; piped input is read line by line as it arrives."""
    interactive = sys.stdin.isatty()
    if interactive:
        try:
            import readline  # noqa: F401  (input() then edits lines and keeps their history)
        except ImportError:
            pass
        sys.stderr.write(f"rlmx chat: one question per line; {COMMANDS}\n")
    while True:
        try:
            line = input("rlmx> ") if interactive else sys.stdin.readline()
        except (EOFError, KeyboardInterrupt):
            return
        if not interactive and not line:
            return
        if line.strip():
            yield line.strip()


def usage_line(usage: dict[str, Any]) -> str:
    calls = usage.get("calls", 0)
    text = (
        f"{calls} call{'' if calls == 1 else 's'}, {usage.get('input_tokens', 0):,} input + "
        f"{usage.get('output_tokens', 0):,} output tokens"
    )
    cost = usage.get("cost_usd")
    return text + (f", ${cost:.4f}" if cost else "")
