"""The options of a run, as the `rlmx` commands take them: each declared once (`RUN_OPTIONS`, in the
order the help lists them, each with the `RunOptions` field it sets), given to a command by
`with_run_options`, turned into `RunOptions` by `run_options`; and library messages turned into the
command line's terms (`cli_terms`)."""

from __future__ import annotations

import functools
import inspect
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rlmx.commands.options import (
    AllowEmptyContext,
    AllowUnknownPrice,
    BaseUrl,
    Cache,
    Concurrency,
    ConfigFile,
    Context,
    Debug,
    DepthModel,
    Exclude,
    Include,
    Json,
    LogLevel,
    MaxCostUsd,
    MaxDepth,
    MaxErrors,
    MaxIterations,
    MaxLlmCalls,
    MaxOutputTokens,
    MaxTotalTokens,
    Mcp,
    Model,
    ModelConcurrency,
    NoGitignore,
    NoTrace,
    Otel,
    OutputSchema,
    Prefilter,
    Price,
    Prompt,
    Quiet,
    ReasoningEffort,
    Sandbox,
    SubModel,
    SubReasoningEffort,
    SubTemperature,
    SubTopP,
    SystemPromptAppend,
    Temperature,
    Timeout,
    Tools,
    TopP,
    Trace,
    TraceFull,
    Verbose,
)


@dataclass(frozen=True)
class Declared:
    """One option of a run: its parameter name, its declaration (an alias above), its default, and the
    `RunOptions` field it sets ("limits.max_cost_usd", "sampling.temperature", "model", ...; None: the
    command reads it itself, e.g. --json)."""

    name: str
    alias: Any
    default: Any
    sets: str | None
    convert: Callable[[Any], Any] | None = None  # the flag's value -> the field's (None: not given)

    @property
    def flag(self) -> str:
        info = typing.get_args(self.alias)[1]
        decls = [d for d in (getattr(info, "param_decls", None) or ()) if d.startswith("--")]
        return decls[0] if decls else "--" + self.name.replace("_", "-")


def _tuple(value: Any) -> Any:
    return tuple(str(v) for v in value) if value else None


def _path(value: Any) -> Any:
    return None if value is None else str(value)


def _depth_models(value: list[str]) -> Any:
    from rlmx.config import parse_depth_models

    return parse_depth_models(value) if value else None


def _prices(value: list[str]) -> Any:
    from rlmx.pricing import parse_price_specs

    return parse_price_specs(value) if value else None


RUN_OPTIONS: tuple[Declared, ...] = (
    Declared("context", Context, [], None),
    Declared("include", Include, [], "include", _tuple),
    Declared("exclude", Exclude, [], "exclude", _tuple),
    Declared("allow_empty_context", AllowEmptyContext, False, "allow_empty_context"),
    Declared("no_gitignore", NoGitignore, False, "gitignore", lambda v: False if v else None),
    Declared("prefilter", Prefilter, None, "prefilter"),
    Declared("model", Model, None, "model"),
    Declared("sub_model", SubModel, None, "sub_model"),
    Declared("base_url", BaseUrl, None, "base_url"),
    Declared("depth_model", DepthModel, [], "models_by_depth", _depth_models),
    Declared("temperature", Temperature, None, "sampling.temperature"),
    Declared("top_p", TopP, None, "sampling.top_p"),
    Declared("reasoning_effort", ReasoningEffort, None, "sampling.reasoning_effort"),
    Declared("sub_temperature", SubTemperature, None, "sub_sampling.temperature"),
    Declared("sub_top_p", SubTopP, None, "sub_sampling.top_p"),
    Declared("sub_reasoning_effort", SubReasoningEffort, None, "sub_sampling.reasoning_effort"),
    Declared("max_depth", MaxDepth, None, "limits.max_depth"),
    Declared("max_iterations", MaxIterations, None, "limits.max_iterations"),
    Declared("max_llm_calls", MaxLlmCalls, None, "limits.max_llm_calls"),
    Declared("max_total_tokens", MaxTotalTokens, None, "limits.max_total_tokens"),
    Declared("max_output_tokens", MaxOutputTokens, None, "limits.max_output_tokens"),
    Declared("max_cost_usd", MaxCostUsd, None, "limits.max_cost_usd"),
    Declared("price", Price, [], "prices", _prices),
    Declared("allow_unknown_price", AllowUnknownPrice, False, "allow_unpriced"),
    Declared("timeout", Timeout, None, "limits.timeout_s"),
    Declared("max_errors", MaxErrors, None, "limits.max_errors"),
    Declared("prompt", Prompt, None, "prompt"),
    Declared("system_prompt_append", SystemPromptAppend, None, "system_prompt_append"),
    Declared("concurrency", Concurrency, None, "concurrency"),
    Declared("model_concurrency", ModelConcurrency, None, "concurrency"),
    Declared("cache", Cache, False, "cache"),
    Declared("config_file", ConfigFile, None, "config_file", _path),
    Declared("trace", Trace, None, "trace", _path),
    Declared("no_trace", NoTrace, False, "trace", lambda v: False if v else None),
    Declared("trace_full", TraceFull, False, "excerpt_chars", lambda v: 0 if v else None),
    Declared("otel", Otel, False, None),  # read by run_options (rlmx.commands.telemetry)
    Declared("sandbox", Sandbox, None, "sandbox"),
    Declared("tools", Tools, [], "tools", _tuple),
    Declared("mcp", Mcp, [], "mcp", _tuple),
    Declared("as_json", Json, False, None),
    Declared("output_schema", OutputSchema, None, "output_schema", _path),
    Declared("quiet", Quiet, False, None),
    Declared(
        "verbose", Verbose, 0, None
    ),  # both set logging up as they are parsed (options.configure_logging)
    Declared("log_level", LogLevel, None, None),
    Declared(
        "debug", Debug, False, None
    ),  # read by rlmx.cli.main() before parsing, so it covers parsing errors
)
DECLARED = {d.name: d for d in RUN_OPTIONS}


def with_run_options(
    *, exclude: tuple[str, ...] = (), layout: tuple[str, ...] | None = None
) -> Callable[[Any], Any]:
    """A command taking the run options as keyword arguments gathered in its `**run` parameter: each
    option is declared once, here. By default every run option but `exclude`, after the command's own
    parameters. With `layout` (names of run options and of the command's own parameters, in the order
    its help lists them): only the run options named there, in that order, then the command's other
    parameters."""

    def wrap(fn: Any) -> Any:
        unknown = set(exclude) - set(DECLARED)
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
        keyword = inspect.Parameter.KEYWORD_ONLY
        own = {
            p.name: p.replace(annotation=hints.get(p.name, p.annotation))
            for p in signature.parameters.values()
            if p.kind is not inspect.Parameter.VAR_KEYWORD
        }
        if layout is not None:
            unknown |= {name for name in layout if name not in DECLARED and name not in own}
        if unknown:
            raise ValueError(f"with_run_options({fn.__name__}): unknown names {sorted(unknown)}")

        def option(name: str) -> inspect.Parameter:
            d = DECLARED[name]
            return inspect.Parameter(d.name, keyword, default=d.default, annotation=d.alias)

        if layout is None:
            params = [*own.values(), *(option(d.name) for d in RUN_OPTIONS if d.name not in {*exclude, *own})]
        else:
            arguments = [p for p in own.values() if p.default is inspect.Parameter.empty]
            placed = [own[n].replace(kind=keyword) if n in own else option(n) for n in layout]
            rest = [p.replace(kind=keyword) for n, p in own.items() if n not in layout and p not in arguments]
            params = [*arguments, *placed, *rest]

        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return wrap


# the run options `rlmx serve` and `rlmx mcp` take (for the profile made from the flags), in their order
SERVED_LAYOUT = (
    "model",
    "sub_model",
    "base_url",
    "temperature",
    "top_p",
    "reasoning_effort",
    "sub_temperature",
    "sub_top_p",
    "sub_reasoning_effort",
    "name",
    "profiles_file",
    "max_depth",
    "max_iterations",
    "max_llm_calls",
    "max_cost_usd",
    "timeout",
    "max_errors",
    "prompt",
    "system_prompt_append",
    "tools",
    "mcp",
    "config_file",
    "otel",
    "verbose",
    "log_level",
)


def run_options(values: Mapping[str, Any], base: Any = None) -> Any:
    """The `RunOptions` of a command's run options by parameter name (those not given stay unset)."""
    from rlmx.lm.sampling import Sampling
    from rlmx.spec.options import RunOptions

    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {"limits": {}, "sampling": {}, "sub_sampling": {}}
    for name, value in values.items():
        declared = DECLARED.get(name)
        if declared is None or declared.sets is None:
            continue
        converted = declared.convert(value) if declared.convert else value
        if converted is None or (converted is False and declared.sets not in ("trace", "gitignore")):
            continue
        group, _, key = declared.sets.partition(".")
        if key:
            nested[group][key] = converted
        else:
            top[group] = converted
    if "otel" in values:
        from rlmx.commands.telemetry import start_telemetry

        start_telemetry(bool(values["otel"]), values.get("config_file"))
    options = base if base is not None else RunOptions()
    return options.replace(
        **top,
        limits=nested["limits"],
        sampling=Sampling(**nested["sampling"]).over(options.sampling),
        sub_sampling=Sampling(**nested["sub_sampling"]).over(options.sub_sampling),
    )


# the library's names in its messages (`max_cost_usd`) -> what a command-line user types
PRICE_HINT = r"`pricer`=Pricing\(\{'([^']+)': Price\(IN, OUT\)\}\)"
LIBRARY_TERMS: dict[str, str] = {
    "pricer": "--price MODEL=IN,OUT",
    "gitignore=False": "--no-gitignore",
    "mcp_servers": "--mcp FILE",
    "out": "--out",
    "batch_max_llm_calls": "--batch-max-llm-calls",
    "batch_max_total_tokens": "--batch-max-total-tokens",
    # rlmx batch's own (rlmx.batch.run's parameters)
    "address": "--address",
    "batch_max_cost_usd": "--batch-max-cost-usd",
    "max_attempts": "--max-attempts",
    "rate_window_s": "--rate-window",
    "rpm": "--rpm",
    "tpm": "--tpm",
    # rlmx serve / rlmx mcp (rlmx.serve.settings, rlmx.serve.profiles, rlmx.mcp_server)
    "profiles_file": "--profiles",
    "name": "--name",
    "host": "--host",
    "port": "--port",
    "root": "--root",
    "token": "--token",
    "no_auth": "--no-auth",
    "trace_dir": "--trace-dir",
    "max_request_bytes": "--max-request-bytes",
    "max_context_bytes": "--max-context-bytes",
    "context_threshold": "--context-threshold",
    "max_running": "--max-running",
    "max_queued": "--max-queued",
    "max_sessions": "--max-sessions",
    "session_idle_s": "--session-idle-s",
    "transport": "--transport",
    # rlmx eval (rlmx.evals.runner.EvalConfig)
    "n": "--n",
    "noise": "--noise",
    "oracle": "--oracle",
    "executor": "--executor",
}


def library_name(declared: Declared) -> str | None:
    """The name the library's messages give the field an option sets (`max_cost_usd`, `sub_top_p`)."""
    if declared.sets is None:
        return None
    group, _, key = declared.sets.partition(".")
    return {"sampling": key, "sub_sampling": f"sub_{key}", "limits": key}.get(group, declared.sets)


def cli_terms(message: str) -> str:
    """A library message in the command line's terms: each backquoted library name (`max_cost_usd`)
    becomes the flag that sets it (`--max-cost-usd`): `=VALUE` after it becomes ` VALUE`, and `=True`
    is dropped (a flag is set by naming it); other backquoted names stay as they are."""
    terms = dict(LIBRARY_TERMS)
    for declared in RUN_OPTIONS:
        name = library_name(declared)
        if name is not None:
            terms.setdefault(name, declared.flag)

    def term(match: re.Match[str]) -> str:
        value = match.group(2)
        whole = terms.get(f"{match.group(1)}{value}") if value else None  # `gitignore`=False
        if whole is not None:
            return whole
        flag = terms.get(match.group(1))
        if flag is None:
            return match.group(0)
        return flag if value in (None, "=True") else f"{flag} {value[1:]}"

    message = re.sub(PRICE_HINT, r"--price \1=IN,OUT", message)  # rlmx.pricing.price_hint
    return re.sub(r"`([A-Za-z_][A-Za-z0-9_.]*)`(=[^\s,;:)]+)?", term, message)
