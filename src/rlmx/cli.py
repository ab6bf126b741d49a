"""The `rlmx` command line. Errors are one line and an exit code; tracebacks only with --debug."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from rlmx.commands import RlmxTyper, trace_file
from rlmx.errors import ConfigError, RLMError
from rlmx.outcomes import EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_ERROR, EXIT_USAGE, exit_code
from rlmx.trace.events import RunStart

if TYPE_CHECKING:
    from rlmx.trace.events import Event


app = RlmxTyper(
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Recursive Language Models: ask questions about contexts far larger than a model's window.",
    epilog="Exit codes: 0 answered; 3 answered after a limit stopped the run; 1 run error; "
    "2 bad usage or configuration. `rlmx` alone prints this help and exits 0.",
)


@app.callback(invoke_without_command=True)
def _root(ctx: typer.Context) -> None:
    """rlmx command line."""
    if ctx.invoked_subcommand is None:  # `rlmx` alone: the help, on stdout, and success
        text = ctx.get_help()  # the rich formatter prints it itself and returns ""
        if text:
            typer.echo(text)
        raise typer.Exit(EXIT_OK)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer.", metavar="QUESTION")],
    context: Annotated[
        list[str],
        typer.Option(
            "--context",
            "-c",
            help="A file (text, PDF, HTML, JSONL, CSV, JSON), a folder (recursive) or '-' for stdin; repeatable.",
        ),
    ] = [],  # noqa: B006
    include: Annotated[
        list[str], typer.Option(help="Only files matching this glob in --context folders; repeatable.")
    ] = [],  # noqa: B006
    exclude: Annotated[
        list[str], typer.Option(help="Leave out files and folders matching this glob; repeatable.")
    ] = [],  # noqa: B006
    allow_empty_context: Annotated[
        bool,
        typer.Option(
            "--allow-empty-context",
            help="Run even when the given context holds no usable text (binary or empty files, no match).",
        ),
    ] = False,
    no_gitignore: Annotated[
        bool, typer.Option("--no-gitignore", help="Read files that .gitignore files exclude.")
    ] = False,
    prefilter: Annotated[
        str | None,
        typer.Option(help="Narrow the context to the K best chunks for the question first: bm25:K."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Root model, provider:model (default: $RLMX_MODEL, the config file, a provider whose key "
            "is set, else the embedded demo model)."
        ),
    ] = None,
    sub_model: Annotated[
        str | None, typer.Option(help="Model for sub-calls and child RLMs (default: the root model).")
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="Base URL of an OpenAI-compatible endpoint.")] = None,
    depth_model: Annotated[
        list[str], typer.Option(help="Model for one depth, DEPTH=PROVIDER:MODEL; repeatable.")
    ] = [],  # noqa: B006
    max_depth: Annotated[
        int | None,
        typer.Option(help="0: no sub-calls; 1: plain sub-calls; 2-8: child RLMs (default: 1)."),
    ] = None,
    max_iterations: Annotated[int | None, typer.Option(help="Turns per RLM (default: 30).")] = None,
    max_llm_calls: Annotated[
        int | None,
        typer.Option(help="Model calls for the whole run; one is kept for the final answer (default: 200)."),
    ] = None,
    max_total_tokens: Annotated[
        int | None, typer.Option(help="Tokens for the whole run (default: no limit).")
    ] = None,
    max_output_tokens: Annotated[
        int | None, typer.Option(help="Output cap per call (default: the provider's).")
    ] = None,
    max_cost_usd: Annotated[
        float | None,
        typer.Option(
            help="USD for the whole run, enforced before each call from a worst-case estimate "
            "(default: no limit)."
        ),
    ] = None,
    price: Annotated[
        list[str],
        typer.Option(help="Price of a model, MODEL=IN,OUT in USD per million tokens; repeatable."),
    ] = [],  # noqa: B006
    allow_unknown_price: Annotated[
        bool,
        typer.Option(
            "--allow-unknown-price", help="With --max-cost-usd: run even if a model has no known price."
        ),
    ] = False,
    timeout: Annotated[
        float | None, typer.Option(help="Seconds for the whole run (default: no limit).")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="Concurrent requests per model (default: 64).", min=1)
    ] = None,
    cache: Annotated[
        bool, typer.Option("--cache", help="Answer repeated model requests from a local SQLite cache.")
    ] = False,
    config_file: Annotated[
        Path | None, typer.Option("--config", help="A config file read after ./rlmx.toml (TOML).")
    ] = None,
    trace: Annotated[
        Path | None,
        typer.Option(
            help="Write the trace to this file (default: a new file in the state dir).",
            callback=trace_file,
        ),
    ] = None,
    no_trace: Annotated[bool, typer.Option("--no-trace", help="Do not write a trace.")] = False,
    trace_full: Annotated[
        bool, typer.Option("--trace-full", help="Keep whole message texts in the trace (default: excerpts).")
    ] = False,
    sandbox: Annotated[
        str,
        typer.Option(
            help="Where model-written code runs: process (isolated; refuses where it cannot isolate), "
            "process-unisolated (reduced isolation, recorded in the trace), local (UNSAFE: in this process)."
        ),
    ] = "process",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
    output_schema: Annotated[
        Path | None,
        typer.Option(help="A JSON schema file the answer must match (it is validated; printed as JSON)."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Answer QUESTION about the given context with a Recursive Language Model."""
    from rlmx.config import choose_models, load_config, parse_depth_models, resolve_models
    from rlmx.context.loaders import context_from_specs
    from rlmx.context.prefilter import Prefilter
    from rlmx.engine.progress import progress_sink
    from rlmx.pricing import Pricing, parse_price_specs
    from rlmx.rlm import RLM

    state["debug"] = debug
    cfg = load_config(config_file)
    choice = choose_models(model, sub_model, cfg, base_url=base_url)
    try:
        limits = cfg.make_limits(
            choice.limits,
            max_depth=max_depth,
            max_iterations=max_iterations,
            max_llm_calls=max_llm_calls,
            max_total_tokens=max_total_tokens,
            max_output_tokens=max_output_tokens,
            max_cost_usd=max_cost_usd,
            timeout_s=timeout,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    sandbox_settings = sandbox_choice(sandbox)
    ctx = context_from_specs(context, include=include, exclude=exclude, gitignore=not no_gitignore)
    if ctx is not None and not allow_empty_context:
        ctx.check_usable()  # refused here: the skipped-files line would only repeat the refusal
    skipped = ctx.skipped_summary() if ctx is not None else None
    if skipped:
        sys.stderr.write(f"rlmx: {skipped}\n")  # even with --quiet: it explains what the model saw
    prefilter_spec = Prefilter.parse(prefilter)
    output = None
    if output_schema is not None:
        from rlmx.typed import load_schema_file

        output = load_schema_file(str(output_schema))
    if choice.note:
        sys.stderr.write(choice.note + "\n")  # once per run, even with --quiet: it explains the answer
    models = resolve_models(
        cfg, choice, parse_depth_models(depth_model), base_url=base_url, concurrency=concurrency
    )
    rlm = RLM(
        models.root,
        sub_model=models.sub,
        models_by_depth=dict(models.by_depth),
        cache=(cfg.cache_path or True) if (cache or cfg.cache_enabled) else None,
        limits=limits,
        trace=False if no_trace else (trace or True),
        pricer=Pricing({**cfg.prices, **parse_price_specs(price)}),
        allow_unpriced=allow_unknown_price,
        prefilter=prefilter_spec,
        excerpt_chars=0 if trace_full else 2_000,
        sandbox=sandbox_settings,
        allow_empty_context=allow_empty_context,
    )
    started = RunStarted()
    try:
        with progress_sink(sys.stderr, quiet=quiet) as sink:
            rlm.on_event = [sink, started]
            result = rlm.run(question, ctx, output=output)
    except KeyboardInterrupt:
        where = f"; trace: {started.trace_path}" if started.trace_path else ""
        sys.stderr.write(f"rlmx: interrupted{where}\n")
        exit_now(EXIT_INTERRUPTED)
    exit_now(report(result, as_json=as_json, quiet=quiet))


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
        why = result.error or "the run produced no answer"
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


state: dict[str, Any] = {"debug": False}

SANDBOX_WARNINGS = {
    "process-unisolated": "rlmx: warning: model-written code runs without namespaces (reduced isolation; "
    "see docs/security.md)",
    "local": "rlmx: warning: model-written code runs INSIDE this process, UNSAFE (trusted code only)",
}


def sandbox_choice(backend: str) -> Any:
    """The --sandbox choice as settings; a reduced one is said on stderr (and recorded in the trace)."""
    from rlmx.sandbox.base import SandboxSettings

    try:
        settings = SandboxSettings(backend=backend)
    except ValueError as exc:
        raise ConfigError(str(exc).replace("SandboxSettings: ", "--sandbox: ")) from exc
    if backend in SANDBOX_WARNINGS:
        sys.stderr.write(SANDBOX_WARNINGS[backend] + "\n")
    return settings


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
        code = app(args=args, prog_name="rlmx", standalone_mode=False)
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
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):  # the parser's usage errors
            if state["debug"]:
                raise
            command = getattr(getattr(exc, "ctx", None), "command_path", None) or "rlmx"
            message = " ".join(str(exc.format_message()).split())  # one line, whatever the parser wrote
            sys.stderr.write(f"rlmx: error: {message} (see `{command} --help`)\n")
            sys.exit(EXIT_USAGE)
        _fail(exc, EXIT_RUN_ERROR)


def _fail(exc: BaseException, code: int) -> None:
    if state["debug"]:
        raise exc
    sys.stderr.write(f"rlmx: error: {exc}\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
