"""`rlmx eval`: run the benchmark families on the RLM and the baselines, and write the report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rlmx.commands import options as opt
from rlmx.errors import ConfigError


def _split(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def family_list() -> str:
    """One line per family: its name, what it asks, and its variants (the first is the default)."""
    from rlmx.evals.registry import FAMILIES, IMAGE_FAMILIES

    every: dict[str, Any] = {**FAMILIES, **IMAGE_FAMILIES}
    width = max(len(name) for name in every)
    return "\n".join(
        f"{name:<{width}}  {fam.description} (variants: {', '.join(fam.variants)})"
        for name, fam in every.items()
    )


def _say_if_no_plots() -> None:
    """The report leaves its plots out without matplotlib: one line on stderr says so, up front."""
    from rlmx.evals.needs import PLOTS_MISSING, plots_available

    if not plots_available():
        sys.stderr.write(f"rlmx eval: {PLOTS_MISSING}; the report is written without them\n")


def eval_command(
    suite: Annotated[
        str, typer.Option(help="Families, comma-separated, or 'all'; `rlmx eval --list` names them.")
    ] = "all",
    list_: Annotated[
        bool, typer.Option("--list", help="Print every family, what it asks and its variants, and exit.")
    ] = False,
    sizes: Annotated[
        str, typer.Option(help="Context sizes in tokens, comma-separated (8k, 32k, 128k, 1m, 10m).")
    ] = "8k,32k",
    n: Annotated[int, typer.Option(help="Items per family and size.", min=1)] = 20,
    seed: Annotated[int, typer.Option(help="Seed of the generated items.")] = 0,
    model: opt.Model = None,
    sub_model: opt.SubModel = None,
    base_url: opt.BaseUrl = None,
    temperature: opt.Temperature = None,
    top_p: opt.TopP = None,
    reasoning_effort: opt.ReasoningEffort = None,
    sub_temperature: opt.SubTemperature = None,
    sub_top_p: opt.SubTopP = None,
    sub_reasoning_effort: opt.SubReasoningEffort = None,
    prompt: opt.Prompt = None,
    system_prompt_append: opt.SystemPromptAppend = None,
    mcp: opt.Mcp = [],  # noqa: B006
    baselines: Annotated[
        str, typer.Option(help="Baselines beside the RLM: direct,bm25,summary (or 'none').")
    ] = "direct,bm25,summary",
    no_rlm: Annotated[bool, typer.Option("--no-rlm", help="Run only the baselines.")] = False,
    variant: Annotated[
        list[str],
        typer.Option(help="FAMILY=VARIANT, e.g. doc_multihop=hotpotqa; repeatable (`rlmx eval --list`)."),
    ] = [],  # noqa: B006
    concurrency: Annotated[int, typer.Option(help="Items run at the same time.", min=1)] = 8,
    executor: Annotated[
        str, typer.Option(help="Where items run: local (this process) or ray (a Ray cluster; rlmx\\[ray]).")
    ] = "local",
    address: Annotated[
        str | None,
        typer.Option(help="With --executor ray: auto, HOST:PORT or ray://HOST:PORT (default: a local Ray)."),
    ] = None,
    out: Annotated[Path, typer.Option(help="Folder for results.jsonl, traces, cache and the report.")] = Path(
        "results"
    ),
    max_depth: opt.MaxDepth = 1,
    max_iterations: opt.MaxIterations = 30,
    max_llm_calls: opt.MaxLlmCalls = 1_000,
    max_output_tokens: opt.MaxOutputTokens = None,
    timeout: opt.Timeout = None,
    max_errors: opt.MaxErrors = None,
    window: Annotated[
        int | None, typer.Option(help="The root model's context window in tokens (for the baselines).")
    ] = None,
    price_in: Annotated[
        float | None, typer.Option(help="USD per million input tokens (models without known prices).")
    ] = None,
    price_out: Annotated[float | None, typer.Option(help="USD per million output tokens.")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not cache model responses.")] = False,
    no_trace: opt.NoTrace = False,
    oracle: Annotated[
        bool,
        typer.Option("--oracle", help="No model: a scripted root and an oracle reader (checks the suite)."),
    ] = False,
    noise: Annotated[
        float, typer.Option(help="With --oracle: probability that each oracle decision is wrong.")
    ] = 0.0,
    report_only: Annotated[
        bool, typer.Option("--report-only", help="Only rebuild the report from --out.")
    ] = False,
    otel: opt.Otel = False,
    quiet: opt.Quiet = False,
    verbose: opt.Verbose = 0,  # -v and --log-level set logging up as they are parsed
    log_level: opt.LogLevel = None,
) -> None:
    """Generate the benchmark items, run the RLM and the baselines on them, and write a report.

    `rlmx eval --list` names the families and their variants. --model is required unless --oracle; the
    baselines use it, its sampling options and --max-output-tokens too, while the other limits, the
    prompt options and --no-trace are the RLM's."""
    from rlmx.commands.prompts import read_append
    from rlmx.evals.baselines import BaselineSettings
    from rlmx.evals.items import parse_size
    from rlmx.evals.needs import check_installed
    from rlmx.evals.registry import FAMILIES
    from rlmx.evals.report import write_report
    from rlmx.evals.runner import EvalConfig, run_suite
    from rlmx.limits import Limits
    from rlmx.lm.registry import ModelOptions

    if list_:
        typer.echo(family_list())
        return
    if report_only:
        _say_if_no_plots()
        typer.echo(str(write_report(out)))
        return
    variants: dict[str, str] = {}
    for entry in variant:
        name, _, value = entry.partition("=")
        if not value:
            raise ConfigError(f"--variant {entry!r}: write FAMILY=VARIANT, e.g. doc_multihop=hotpotqa")
        variants[name.strip()] = value.strip()
    chosen = () if baselines.strip().lower() == "none" else _split(baselines)
    methods = (() if no_rlm else ("rlm",)) + chosen
    if not methods:
        raise ConfigError("nothing to run: --no-rlm with --baselines none")
    from rlmx.evals.registry import check_image_methods

    suite_names = tuple(FAMILIES) if suite.strip().lower() == "all" else _split(suite)
    flags = {"suite": "--suite", "methods": "--baselines", "fix": "add --baselines none"}
    check_image_methods(suite_names, chosen, flags)
    if (price_in is None) != (price_out is None):
        raise ConfigError("give both --price-in and --price-out (USD per million tokens), or neither")
    given: dict[str, Any] = {  # None: not given and no default here, so the Limits default
        "max_depth": max_depth,
        "max_iterations": max_iterations,
        "max_llm_calls": max_llm_calls,
        "max_output_tokens": max_output_tokens,
        "timeout_s": timeout,
        "max_errors": max_errors,
    }
    limits = Limits(**{name: value for name, value in given.items() if value is not None})
    config = EvalConfig(
        suite=suite_names,
        sizes=tuple(parse_size(s) for s in _split(sizes)),
        out=out,
        n=n,
        seed=seed,
        methods=methods,
        model=model,
        sub_model=sub_model,
        model_options=ModelOptions(base_url=base_url, concurrency=max(concurrency, 8)),
        limits=limits,
        window=window,
        concurrency=concurrency,
        cache=not no_cache,
        trace=not no_trace,
        variants=variants,
        oracle=oracle,
        noise=noise,
        baseline=BaselineSettings(max_output_tokens=max_output_tokens),
        prices=(price_in, price_out) if price_in is not None and price_out is not None else None,
        sampling=opt.sampling(temperature, top_p, reasoning_effort),
        sub_sampling=opt.sampling(sub_temperature, sub_top_p, sub_reasoning_effort),
        prompt=prompt or "rlmx",
        system_prompt_append=read_append(system_prompt_append) if system_prompt_append else "",
        executor=executor,
        address=address,
        mcp_servers=[str(p.expanduser().resolve()) for p in mcp] or None,
    )

    if config.mcp_servers:
        from rlmx.mcp.config import load_servers

        load_servers(config.mcp_servers)  # a bad file is refused before any model call
    from rlmx.commands.telemetry import start_telemetry

    start_telemetry(otel)
    check_installed(
        config, terms={"methods": "--baselines", "executor": "--executor"}
    )  # before any model call: a missing extra costs nothing
    _say_if_no_plots()

    def progress(line: str) -> None:
        if not quiet:
            sys.stderr.write(f"[eval] {line}\n")

    written = run_suite(config, log=progress)
    if not quiet:
        sys.stderr.write(f"[eval] {len(written)} new results; report: {out / 'report.md'}\n")
    typer.echo(str(out / "report.md"))


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
