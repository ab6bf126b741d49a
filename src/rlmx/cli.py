"""The `rlmx` command line. Errors are one line and an exit code; tracebacks only with --debug."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rlmx.errors import ConfigError, RLMError

EXIT_OK, EXIT_RUN_ERROR, EXIT_USAGE, EXIT_LIMIT = 0, 1, 2, 3
NO_MODEL = (
    "no model configured: pass --model PROVIDER:MODEL (e.g. --model openai:gpt-5-mini with OPENAI_API_KEY set), "
    "or set RLMX_MODEL; for a local OpenAI-compatible server use --model openai:NAME --base-url http://127.0.0.1:8080/v1"
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Recursive Language Models: ask questions about contexts far larger than a model's window.",
)


@app.callback()
def _root() -> None:
    """rlmx command line."""


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer.")],
    context: Annotated[
        list[str], typer.Option("--context", "-c", help="A file, folder or '-' for stdin; repeatable.")
    ] = [],  # noqa: B006
    model: Annotated[
        str | None, typer.Option(help="Root model, provider:model (default: $RLMX_MODEL).")
    ] = None,
    sub_model: Annotated[
        str | None, typer.Option(help="Model for sub-calls and child RLMs (default: the root model).")
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="Base URL of an OpenAI-compatible endpoint.")] = None,
    max_depth: Annotated[int, typer.Option(help="0: no sub-calls; 1: plain sub-calls; 2+: child RLMs.")] = 1,
    max_iterations: Annotated[int, typer.Option(help="Turns per RLM.")] = 30,
    max_llm_calls: Annotated[
        int, typer.Option(help="Model calls for the whole run (one is kept for the final answer).")
    ] = 200,
    max_total_tokens: Annotated[int | None, typer.Option(help="Tokens for the whole run.")] = None,
    max_output_tokens: Annotated[int | None, typer.Option(help="Output cap per call.")] = None,
    timeout: Annotated[float | None, typer.Option(help="Seconds for the whole run.")] = None,
    concurrency: Annotated[int, typer.Option(help="Concurrent requests per model.")] = 32,
    trace: Annotated[
        Path | None, typer.Option(help="Write the trace here (default: a new file in the state dir).")
    ] = None,
    no_trace: Annotated[bool, typer.Option("--no-trace", help="Do not write a trace.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Answer QUESTION about the given context with a Recursive Language Model."""
    from rlmx.context.loaders import load_contexts
    from rlmx.engine.events import ProgressLines
    from rlmx.limits import Limits
    from rlmx.lm.registry import ModelOptions
    from rlmx.rlm import RLM

    state["debug"] = debug
    model = model or os.environ.get("RLMX_MODEL")
    sub_model = sub_model or os.environ.get("RLMX_SUB_MODEL")
    if not model:
        raise ConfigError(NO_MODEL)
    try:
        limits = Limits(
            max_depth=max_depth,
            max_iterations=max_iterations,
            max_llm_calls=max_llm_calls,
            max_total_tokens=max_total_tokens,
            max_output_tokens=max_output_tokens,
            timeout_s=timeout,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    ctx = load_contexts(context)
    rlm = RLM(
        model,
        sub_model=sub_model,
        limits=limits,
        trace=False if no_trace else (trace or True),
        model_options=ModelOptions(base_url=base_url, concurrency=concurrency),
        on_event=None if quiet else ProgressLines(sys.stderr),
    )
    result = rlm.run(question, ctx)
    if as_json:
        out: dict[str, Any] = result.to_dict()
        typer.echo(json.dumps(out, ensure_ascii=False))
    else:
        answer = result.answer
        typer.echo(answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False))
    if not quiet:
        where = f"; trace: {result.trace_path}" if result.trace_path else ""
        sys.stderr.write(f"[rlmx] stopped by {result.stopped_by} after {result.iterations} turns{where}\n")
        if result.error:
            sys.stderr.write(f"rlmx: error: {result.error}\n")
    code = (
        EXIT_OK
        if result.stopped_by == "final"
        else EXIT_RUN_ERROR
        if result.stopped_by == "error"
        else EXIT_LIMIT
    )
    raise typer.Exit(code)


state: dict[str, Any] = {"debug": False}


def _register_commands() -> None:
    import importlib

    from rlmx.commands import COMMAND_MODULES

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
    """Console entry point: one clear line per error, the contract's exit codes."""
    args = sys.argv[1:] if argv is None else argv
    state["debug"] = "--debug" in args
    try:
        code = app(args=args, standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except ConfigError as exc:
        _fail(exc, EXIT_USAGE)
    except RLMError as exc:
        _fail(exc, EXIT_RUN_ERROR)
    except KeyboardInterrupt:
        sys.stderr.write("rlmx: interrupted\n")
        sys.exit(130)
    except Exception as exc:  # usage errors from the argument parser, and anything unexpected
        if type(exc).__name__ == "Abort":
            sys.exit(130)
        if hasattr(exc, "format_message") and hasattr(
            exc, "exit_code"
        ):  # click's (or typer's vendored) usage errors
            if state["debug"]:
                raise
            sys.stderr.write(f"rlmx: {exc.format_message()} (see rlmx --help)\n")
            sys.exit(EXIT_USAGE)
        _fail(exc, EXIT_RUN_ERROR)


def _fail(exc: BaseException, code: int) -> None:
    if state["debug"]:
        raise exc
    sys.stderr.write(f"rlmx: error: {exc}\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
