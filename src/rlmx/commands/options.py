"""The options of the `rlmx` commands, each declared once and used by every command that takes it.

A command names an option by its alias (`max_depth: options.MaxDepth = None`), so the flag, its help
text and its checks are the same wherever it appears; only the default is the command's own, given with
`=` in its signature. Every option that describes a run is here, even those only `ask` takes today (the
context, prices, sandbox and trace options). A server's own options (--host, --port, --root, ...) and a
flag that means something else in one command (`rlmx eval --concurrency` counts items, not requests per
model) are declared in that command's module.

A help text may end in `(default: {default})`: each command fills it in with its own default (see
`fill_in_defaults`), so `rlmx eval --help` says 1000 model calls where `rlmx ask --help` says 200. Where
the command's default is None (not given: the config file, a profile or the library decides), the
library's default is shown, from `SHOWN_WHEN_UNSET`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rlmx.errors import InvalidSettings
from rlmx.limits import Limits
from rlmx.lm.sampling import (
    REASONING_EFFORTS,
    Sampling,
    check_reasoning_effort,
    check_temperature,
    check_top_p,
)

DEFAULT_MARK = "{default}"

_LIBRARY = Limits()
SHOWN_WHEN_UNSET: dict[str, object] = {
    "--max-depth": _LIBRARY.max_depth,
    "--max-iterations": _LIBRARY.max_iterations,
    "--max-llm-calls": _LIBRARY.max_llm_calls,
}


def fill_in_defaults(params: list[Any]) -> list[Any]:
    """Write each option's default into its help text, where the text asks for it with `{default}`."""
    for param in params:
        help_text = getattr(param, "help", None)
        if help_text and DEFAULT_MARK in help_text:
            shown = param.default if param.default is not None else SHOWN_WHEN_UNSET[param.opts[0]]
            param.help = help_text.replace(DEFAULT_MARK, str(shown))
    return params


# --- validation callbacks -----------------------------------------------------------------------------


def trace_file(value: Path | None) -> Path | None:
    """`--trace FILE`: refuse a folder at parsing time, in one line, rather than failing at the first write."""
    if value is not None and value.is_dir():
        raise typer.BadParameter(
            f"{value} is a folder; give a file path for the trace, e.g. {value / 'run.jsonl'}"
        )
    return value


def _checked(check: Any) -> Any:
    """A callback refusing, at parsing time and in one line, a value the sampling settings refuse."""

    def callback(value: Any) -> Any:
        try:
            return check(value, "the value")
        except InvalidSettings as exc:
            raise typer.BadParameter(str(exc).replace("the value must be", "must be")) from exc

    return callback


def sampling(temperature: float | None, top_p: float | None, reasoning_effort: str | None) -> Sampling:
    """One role's sampling options as settings (already checked by their callbacks)."""
    return Sampling(temperature, top_p, reasoning_effort)


# --- models ---------------------------------------------------------------------------------------------

Model = Annotated[
    str | None,
    typer.Option(help="Root model, provider:model (when not given: see above)."),
]
SubModel = Annotated[
    str | None, typer.Option(help="Model for sub-calls and child RLMs (default: the root model).")
]
BaseUrl = Annotated[str | None, typer.Option(help="Base URL of an OpenAI-compatible endpoint.")]
DepthModel = Annotated[list[str], typer.Option(help="Model for one depth, DEPTH=PROVIDER:MODEL; repeatable.")]
Concurrency = Annotated[int | None, typer.Option(help="Concurrent requests per model (default: 64).", min=1)]
ModelConcurrency = Annotated[
    int | None, typer.Option(help="Concurrent requests per model in each process (default: 64).", min=1)
]

# --- sampling (sent to the provider; default: not sent, so the provider's own) ---------------------------

_SAME = " (the sub-model takes it too when it is the root model)"
Temperature = Annotated[
    float | None,
    typer.Option(
        help=f"Sampling temperature of the root model, 0-2{_SAME}.", callback=_checked(check_temperature)
    ),
]
TopP = Annotated[
    float | None,
    typer.Option(
        help=f"Nucleus sampling (top_p) of the root model, 0-1{_SAME}.", callback=_checked(check_top_p)
    ),
]
ReasoningEffort = Annotated[
    str | None,
    typer.Option(
        help=f"Reasoning effort of the root model: {', '.join(REASONING_EFFORTS)}{_SAME}.",
        metavar="LEVEL",
        callback=_checked(check_reasoning_effort),
    ),
]
SubTemperature = Annotated[
    float | None,
    typer.Option(
        help="Sampling temperature of the sub-model (sub-calls, child RLMs).",
        callback=_checked(check_temperature),
    ),
]
SubTopP = Annotated[
    float | None,
    typer.Option(help="Nucleus sampling (top_p) of the sub-model.", callback=_checked(check_top_p)),
]
SubReasoningEffort = Annotated[
    str | None,
    typer.Option(
        help="Reasoning effort of the sub-model.", metavar="LEVEL", callback=_checked(check_reasoning_effort)
    ),
]

# --- limits ---------------------------------------------------------------------------------------------

MaxDepth = Annotated[
    int | None,
    typer.Option(
        help="0: no sub-calls; 1: plain sub-calls; 2-8: child RLMs (default: {default}).", show_default=False
    ),
]
MaxIterations = Annotated[
    int | None, typer.Option(help="Turns per RLM (default: {default}).", show_default=False)
]
MaxLlmCalls = Annotated[
    int | None,
    typer.Option(
        help="Model calls for the whole run; one is kept for the final answer (default: {default}).",
        show_default=False,
    ),
]
MaxTotalTokens = Annotated[int | None, typer.Option(help="Tokens for the whole run (default: no limit).")]
MaxOutputTokens = Annotated[int | None, typer.Option(help="Output cap per call (default: the provider's).")]
MaxCostUsd = Annotated[
    float | None,
    typer.Option(
        help="USD for the whole run, enforced before each call from a worst-case estimate (default: no limit)."
    ),
]
Timeout = Annotated[float | None, typer.Option(help="Seconds for the whole run (default: no limit).")]
MaxErrors = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Stop after this many turns in a row whose code raised, with a final answer (default: no limit).",
    ),
]
Prompt = Annotated[
    str | None,
    typer.Option(
        help="Prompt profile: rlmx (FINAL and the answer dict), official (the official RLM contract, for "
        "checkpoints trained on it) or a template file (default: rlmx; see `rlmx prompts list`)."
    ),
]
SystemPromptAppend = Annotated[
    str | None, typer.Option(help="Text added to the system prompt of any profile; @FILE reads a file.")
]

# --- prices, cache, configuration ---------------------------------------------------------------------

Price = Annotated[
    list[str], typer.Option(help="Price of a model, MODEL=IN,OUT in USD per million tokens; repeatable.")
]
AllowUnknownPrice = Annotated[
    bool,
    typer.Option(
        "--allow-unknown-price", help="With --max-cost-usd: run even if a model has no known price."
    ),
]
Cache = Annotated[
    bool, typer.Option("--cache", help="Answer repeated model requests from a local SQLite cache.")
]
ConfigFile = Annotated[
    Path | None,
    typer.Option("--config", help="A config file read after ./rlmx.toml (TOML); see docs/providers.md."),
]
ProfilesFile = Annotated[
    Path | None,
    typer.Option(
        "--profiles", help="TOML file of profiles (one profiles.NAME table each); see docs/serve.md."
    ),
]

# --- context --------------------------------------------------------------------------------------------

Context = Annotated[
    list[str],
    typer.Option(
        "--context",
        "-c",
        help="A file (text, PDF, HTML, JSONL, CSV, JSON), a folder (recursive) or '-' for stdin; repeatable.",
    ),
]
Include = Annotated[
    list[str], typer.Option(help="Only files matching this glob in --context folders; repeatable.")
]
Exclude = Annotated[
    list[str], typer.Option(help="Leave out files and folders matching this glob; repeatable.")
]
AllowEmptyContext = Annotated[
    bool,
    typer.Option(
        "--allow-empty-context",
        help="Run even when the given context holds no usable text (binary or empty files, no match).",
    ),
]
NoGitignore = Annotated[
    bool, typer.Option("--no-gitignore", help="Read files that .gitignore files exclude.")
]
Prefilter = Annotated[
    str | None,
    typer.Option(help="Narrow the context to the K best chunks for the question first: bm25:K."),
]
MaxContextBytes = Annotated[int, typer.Option(help="Largest context per run, files included.")]
MaxSessions = Annotated[
    int,
    typer.Option(help='Sessions open at once; a new one ("new") beyond it is refused (0: no sessions).'),
]
SessionIdleS = Annotated[
    float,
    typer.Option(help="A session with no question for this many seconds closes; its id is then refused."),
]

# --- where code runs, traces, output ------------------------------------------------------------------

Sandbox = Annotated[
    str | None,
    typer.Option(
        help="Where model-written code runs: process (the default: isolated by namespaces, else by "
        "Landlock + seccomp; refuses where neither works), process-namespaces or process-landlock (that "
        "layer only), process-unisolated (reduced isolation, recorded in the trace), local (UNSAFE: in "
        "this process). Default: the config file's sandbox backend, else process; rlmx doctor tells what works here.",
        show_default=False,
    ),
]
Tools = Annotated[
    list[str],
    typer.Option(
        "--tools",
        metavar="MODULE:ATTR",
        help="Your own tools in the REPL: MODULE:ATTR names a dict (name -> function or value) or a list of "
        "functions, importable here (on PYTHONPATH); the functions run in this process. Repeatable.",
    ),
]
Mcp = Annotated[
    list[Path],
    typer.Option(
        "--mcp",
        metavar="FILE",
        help="MCP servers whose tools the REPL gets: a JSON file in the mcpServers format of Claude Desktop, "
        "Cursor and .mcp.json (stdio and streamable HTTP; docs/mcp-servers.md). Repeatable.",
    ),
]
Trace = Annotated[
    Path | None,
    typer.Option(
        help="Write the trace to this file (default: a new file in the state dir).", callback=trace_file
    ),
]
NoTrace = Annotated[bool, typer.Option("--no-trace", help="Do not write run traces.")]
TraceFull = Annotated[
    bool, typer.Option("--trace-full", help="Keep whole message texts in the trace (default: excerpts).")
]
Otel = Annotated[
    bool,
    typer.Option(
        "--otel",
        help="Export OpenTelemetry traces over OTLP ($OTEL_EXPORTER_OTLP_ENDPOINT, ...; rlmx\\[otel]; "
        "docs/telemetry.md).",
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
OutputSchema = Annotated[
    Path | None,
    typer.Option(help="A JSON schema file the answer must match (it is validated; printed as JSON)."),
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr.")]
Debug = Annotated[bool, typer.Option("--debug", help="Show tracebacks.")]


# --- logging (-v/--verbose, --log-level): set up while the options are parsed --------------------------

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
CLIENT_LOGGERS = ("httpx", "openai", "anthropic", "LiteLLM")  # the model clients' own logs, at -vv


def check_log_level(value: str | None) -> str | None:
    if value is not None and value.lower() not in LOG_LEVELS:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(LOG_LEVELS)}")
    return None if value is None else value.lower()


def stderr_handler(fmt: str) -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(fmt, "%Y-%m-%d %H:%M:%S"))
    handler.rlmx_stderr = True  # type: ignore[attr-defined]
    return handler


def configure_logging(verbose: int, level: str | None) -> None:
    """rlmx's loggers on stderr: `--log-level LEVEL` from LEVEL up, else -v from INFO, -vv from DEBUG with
    the model clients' loggers (httpx, openai, ...) from INFO, -vvv those from DEBUG too. Neither given:
    nothing changes (warnings and errors only)."""
    if not verbose and level is None:
        return
    chosen = level.upper() if level else ("INFO" if verbose == 1 else "DEBUG")
    names = [("rlmx", chosen)]
    if verbose >= 2:
        names += [(name, "INFO" if verbose == 2 else "DEBUG") for name in CLIENT_LOGGERS]
    for name, at in names:
        logger = logging.getLogger(name)
        logger.setLevel(at)
        for old in [h for h in logger.handlers if getattr(h, "rlmx_stderr", False)]:
            logger.removeHandler(old)
        logger.addHandler(stderr_handler("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.propagate = False


def _logging_option(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    """Each of the two options records its value and sets logging up with both seen so far: the last
    one parsed sets it with both."""
    if param.name == "log_level":
        value = check_log_level(value)
    ctx.meta[f"rlmx_{param.name}"] = value
    configure_logging(ctx.meta.get("rlmx_verbose") or 0, ctx.meta.get("rlmx_log_level"))
    return value


Verbose = Annotated[
    int,
    typer.Option(
        "--verbose",
        "-v",
        count=True,
        metavar="",
        show_default=False,
        callback=_logging_option,
        help="rlmx's log on stderr: -v from INFO (the run's model, endpoint and trace), -vv from DEBUG "
        "with the model clients' requests (httpx, openai), -vvv theirs from DEBUG too.",
    ),
]
LogLevel = Annotated[
    str | None,
    typer.Option(
        "--log-level",
        metavar="LEVEL",
        callback=_logging_option,
        help="rlmx's log on stderr from LEVEL up: debug, info, warning, error, critical (default: warning; "
        "rlmx serve: info, a line per request).",
    ),
]
