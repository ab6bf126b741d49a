"""An `RLM` from `rlmx ask`'s options by name: what `rlmx ask`, `rlmx chat` and every item of `rlmx batch`
are built with (the configuration read, models resolved, every refusal made before any model call)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlmx.errors import ConfigError, InvalidSettings


@dataclass
class BuiltRLM:
    rlm: Any  # rlmx.rlm.RLM
    context: Any
    output: Any


def build_rlm(
    o: dict[str, Any],
    *,
    load_context: Callable[[], Any] = lambda: None,
    limiters: Callable[[str], Any] | None = None,
    say: Callable[[str], None] | None = None,
) -> BuiltRLM:
    """An `RLM` from ask's options by name (`o`; a batch item's model and limits already merged in). The
    configuration is read and every refusal made before `load_context()` is called. `limiters(model)`: a
    rate limiter shared beyond this run (a batch's); `say`: where the one-time notes and warnings go
    (default: stderr)."""
    from rlmx.config import choose_models, load_config, parse_depth_models, resolve_models
    from rlmx.context.prefilter import Prefilter
    from rlmx.lm.sampling import Sampling
    from rlmx.pricing import Pricing, parse_price_specs
    from rlmx.rlm import RLM
    from rlmx.tools import load_configured

    say = say or to_stderr
    cfg = load_config(o["config_file"])
    choice = choose_models(o["model"], o["sub_model"], cfg, base_url=o["base_url"])
    given = {
        "max_depth": o["max_depth"],
        "max_iterations": o["max_iterations"],
        "max_llm_calls": o["max_llm_calls"],
        "max_total_tokens": o["max_total_tokens"],
        "max_output_tokens": o["max_output_tokens"],
        "max_cost_usd": o["max_cost_usd"],
        "timeout_s": o["timeout"],
        "max_errors": o["max_errors"],
    }
    limits = cfg.make_limits(choice.limits, **{**given, **o.get("item_limits", {})})  # a batch item's own win
    sandbox_settings = sandbox_choice(o["sandbox"], say=say)
    # the config's tools plus --tools, refused here (import, names) before any model call
    tool_set, sub_tool_set = load_configured(cfg.tools, cfg.sub_tools, o["tools"])
    context = load_context()
    prefilter_spec = Prefilter.parse(o["prefilter"])
    output = None
    if o["output_schema"] is not None:
        from rlmx.typed import load_schema_file

        schema = o["output_schema"]
        output = schema if isinstance(schema, dict) else load_schema_file(str(schema))
    if choice.note:
        say(choice.note)  # once per run, even with --quiet: it explains the answer
    models = resolve_models(
        cfg,
        choice,
        parse_depth_models(o["depth_model"]),
        base_url=o["base_url"],
        concurrency=o["concurrency"],
        sampling=Sampling(o["temperature"], o["top_p"], o["reasoning_effort"]),
        sub_sampling=Sampling(o["sub_temperature"], o["sub_top_p"], o["sub_reasoning_effort"]),
        limiters=limiters,
    )
    append = o["system_prompt_append"]
    rlm = RLM(
        models.root,
        sub_model=models.sub,
        models_by_depth=dict(models.by_depth),
        cache=(cfg.cache_path or True) if (o["cache"] or cfg.cache_enabled) else None,
        limits=limits,
        trace=False if o["no_trace"] else (o["trace"] or True),
        pricer=Pricing({**cfg.prices, **parse_price_specs(o["price"])}),
        allow_unpriced=o["allow_unknown_price"],
        prefilter=prefilter_spec,
        excerpt_chars=0 if o["trace_full"] else 2_000,
        sandbox=sandbox_settings,
        allow_empty_context=o["allow_empty_context"],
        prompt=o["prompt"] or cfg.prompt or "rlmx",
        tools=tool_set,
        sub_tools=sub_tool_set,
        system_prompt_append=read_append(append) if append else cfg.system_prompt_append,
    )
    return BuiltRLM(rlm, context, output)


def to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")


SANDBOX_WARNINGS = {
    "process-unisolated": "rlmx: warning: model-written code runs without namespaces (reduced isolation; "
    "see docs/security.md)",
    "local": "rlmx: warning: model-written code runs INSIDE this process, UNSAFE (trusted code only)",
}


def sandbox_choice(backend: str, say: Callable[[str], None] | None = None) -> Any:
    """The --sandbox choice as settings; a reduced one is said on stderr (and recorded in the trace)."""
    from rlmx.sandbox.base import SandboxSettings

    try:
        settings = SandboxSettings(backend=backend)
    except InvalidSettings as exc:  # named after the option the user typed
        raise InvalidSettings(str(exc).replace("SandboxSettings: ", "--sandbox: ")) from exc
    if backend in SANDBOX_WARNINGS:
        (say or to_stderr)(SANDBOX_WARNINGS[backend])
    return settings


def read_append(value: str) -> str:
    """`--system-prompt-append TEXT` or `@FILE`."""
    if not value.startswith("@"):
        return value
    path = Path(value[1:]).expanduser()
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--system-prompt-append: cannot read {path}: {exc.strerror or exc}") from exc
