"""The `rlmx` command line: the app, its commands (in `rlmx.commands`) and `main()`, which turns every
error into one line and an exit code; tracebacks only with --debug."""

from __future__ import annotations

import importlib
import sys
from typing import NoReturn

import typer

from rlmx.commands import COMMAND_MODULES, RlmxTyper
from rlmx.errors import ConfigError, RLMError
from rlmx.outcomes import EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_ERROR, EXIT_USAGE

app = RlmxTyper(
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Recursive Language Models: ask questions about contexts far larger than a model's window.",
    epilog="Exit codes: 0 answered; 3 answered after a limit stopped the run; 1 run error; "
    "2 bad usage or configuration; 130 interrupted (Ctrl-C). `rlmx` alone prints this help and exits 0.",
)


def version_line() -> str:
    """`rlmx --version`: rlmx's version, this Python's, and where model code would run on this host."""
    import platform

    from rlmx import __version__
    from rlmx.sandbox.probe import startup_line

    return f"rlmx {__version__} (Python {platform.python_version()}; model code: {startup_line()})"


def _version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit(EXIT_OK)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version,
        is_eager=True,
        help="Print rlmx's version and the sandbox layer model code would get here, and exit.",
    ),
) -> None:
    """rlmx command line."""
    if ctx.invoked_subcommand is None:  # `rlmx` alone: the help, on stdout, and success
        text = ctx.get_help()  # the rich formatter prints it itself and returns ""
        if text:
            typer.echo(text)
        raise typer.Exit(EXIT_OK)


def _register_commands() -> None:
    for name in COMMAND_MODULES:
        module_name = f"rlmx.commands.{name}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # that command is not part of this build
            raise
        module.register(app)


_register_commands()


def main(argv: list[str] | None = None) -> None:
    """Console entry point: one clear line per error, the contract's exit codes.

    `--debug` is read here, before parsing, so that it shows the traceback of a parsing error too."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    try:
        code = app(args=args, prog_name="rlmx", standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except ConfigError as exc:
        _fail(exc, EXIT_USAGE, debug=debug)
    except RLMError as exc:
        _fail(exc, EXIT_RUN_ERROR, debug=debug)
    except KeyboardInterrupt:
        sys.stderr.write("rlmx: interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:  # usage errors from the argument parser, and anything unexpected
        if type(exc).__name__ == "Abort":
            sys.exit(EXIT_INTERRUPTED)
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):  # the parser's usage errors
            if debug:
                raise
            command = getattr(getattr(exc, "ctx", None), "command_path", None) or "rlmx"
            message = " ".join(str(exc.format_message()).split())  # one line, whatever the parser wrote
            sys.stderr.write(f"rlmx: error: {message} (see `{command} --help`)\n")
            sys.exit(EXIT_USAGE)
        _fail(exc, EXIT_RUN_ERROR, debug=debug)


def _fail(exc: BaseException, code: int, *, debug: bool) -> NoReturn:
    """One line on stderr, in the command line's terms (the library names fields; see cli_terms)."""
    if debug:
        raise exc
    from rlmx.commands.run_options import cli_terms

    sys.stderr.write(f"rlmx: error: {cli_terms(str(exc))}\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
