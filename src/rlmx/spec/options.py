"""The one translation layer: what a user states about a run (`RunOptions`, in library names, from any
front end) becomes a `RunSpec` (`build_spec`), with the configuration files read and every refusal
made before any model call.

The command line's flags (rlmx.commands.options declares each flag with the `RunOptions` field it
sets), `rlmx serve` / `rlmx mcp` profile tables, a batch line's overrides and eval's options all come
here. `RunOptions` fields left as None / empty are "not given": the config file, then the library's
defaults decide."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from rlmx.errors import ConfigError, InvalidSettings
from rlmx.lm.sampling import Sampling
from rlmx.spec.run import RunSpec

if TYPE_CHECKING:
    from rlmx.sandbox.base import SandboxSettings

Say = Callable[[str], None]

SANDBOX_WARNINGS = {
    "process-unisolated": "rlmx: warning: model-written code runs without namespaces (reduced isolation; "
    "see docs/security.md)",
    "local": "rlmx: warning: model-written code runs INSIDE this process, UNSAFE (trusted code only)",
}


@dataclass(frozen=True)
class RunOptions:
    """A run as a user states it. Models: `model`, `sub_model` (None: $RLMX_MODEL, the config, a key's
    default, the embedded model), `models_by_depth`, `base_url`, `concurrency` (requests in flight per
    model); `sampling` / `sub_sampling`: the root's and the sub-model's; `limits`: `Limits` fields
    given; `prices`: model -> `Price`; `prompt`, `system_prompt_append` (text, or "@FILE");
    `tools`: `MODULE:ATTR` references beside the config's; `sub_tools`: the children's, over the
    config's `sub_tools` (None: the config's; `()`: none); `sandbox`: the backend's name; `trace`: a
    path, False (off) or None (a new file); `excerpt_chars` (0: whole texts); `cache`;
    `output_schema`: a JSON schema or a schema file's path; `config_file`: read after the user's and
    the project's. `include` / `exclude` / `gitignore` are how files of a context are picked."""

    model: str | None = None
    sub_model: str | None = None
    base_url: str | None = None
    models_by_depth: Mapping[int, str] = field(default_factory=dict)
    sampling: Sampling = field(default_factory=Sampling)
    sub_sampling: Sampling = field(default_factory=Sampling)
    sampling_by_depth: Mapping[int, Sampling] = field(default_factory=dict)  # a depth's own settings
    concurrency: int | None = None
    api_key_env: str | None = None  # the variable holding the key of every model (over the providers')
    limits: Mapping[str, Any] = field(default_factory=dict)
    prices: Mapping[str, Any] = field(default_factory=dict)
    allow_unpriced: bool = False
    prompt: str | None = None
    system_prompt_append: str | None = None
    tools: tuple[str, ...] = ()
    sub_tools: tuple[str, ...] | None = None
    mcp: tuple[str, ...] = ()  # `mcpServers` JSON files beside the config's `mcp` (rlmx.mcp)
    sandbox: str | None = None  # None: the config's [sandbox] backend, else "process"
    trace: str | bool | None = None
    excerpt_chars: int | None = None
    cache: bool = False
    output_schema: Any = None
    prefilter: str | None = None
    allow_empty_context: bool = False
    config_file: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    gitignore: bool = True

    def replace(self, **changes: Any) -> RunOptions:
        """A copy with `changes`; `limits` given as a dict are merged over these options' own."""
        if "limits" in changes:
            changes["limits"] = {
                **self.limits,
                **{k: v for k, v in changes["limits"].items() if v is not None},
            }
        return dataclasses.replace(self, **changes)

    def portable(self) -> RunOptions:
        """These options as another process must see them, whatever its working directory: files
        named by absolute paths, `system_prompt_append` "@FILE" read here."""
        changes: dict[str, Any] = {}
        for key in ("config_file", "output_schema"):
            value = getattr(self, key)
            if isinstance(value, (str, os.PathLike)):
                changes[key] = str(Path(value).resolve())
        if self.mcp:
            changes["mcp"] = tuple(str(Path(p).expanduser().resolve()) for p in self.mcp)
        if self.prompt is not None and not is_built_in(self.prompt) and Path(self.prompt).is_file():
            changes["prompt"] = str(Path(self.prompt).resolve())  # a template file
        if self.system_prompt_append is not None:
            changes["system_prompt_append"] = read_append(self.system_prompt_append)
        return dataclasses.replace(self, **changes)


@dataclass
class BuiltSpec:
    spec: RunSpec
    note: str | None  # rlmx's one-time note when it chose the model itself
    embedded: bool  # the model is the embedded demo model


def sandbox_settings(backend: str | None, table: Mapping[str, Any]) -> SandboxSettings:
    """The run's sandbox: `backend` (None: the config's `[sandbox]` backend, else "process") and the
    config's worker uid range. A layer named explicitly (process-namespaces, process-landlock) that
    this host cannot build is refused here, before any model call."""
    from rlmx.sandbox.base import SandboxSettings
    from rlmx.sandbox.probe import named_layer_missing

    values = {**table, "backend": backend or table.get("backend") or "process"}
    try:
        settings = SandboxSettings(**values)
    except InvalidSettings as exc:
        raise InvalidSettings(str(exc).replace("SandboxSettings: ", "`sandbox`: ")) from exc
    missing = named_layer_missing(settings.backend)
    if missing is not None:
        raise InvalidSettings(
            f"`sandbox`={settings.backend} is not available here: {missing}; rlmx doctor says what this "
            "host offers (`sandbox`=process picks what works)"
        )
    return settings


def build_spec(
    options: RunOptions,
    *,
    limiters: Callable[[str], Any] | None = None,
    say: Say | None = None,
    config: Any = None,
    environ: Mapping[str, str] | None = None,
) -> BuiltSpec:
    """The spec of `options` over the configuration files (`config`: one already read). Every
    refusal (configuration, models, keys, tools, limits, schema) is made here. `limiters(model)`: a
    rate limiter shared beyond the run (a batch's); `say`: where the model note and the sandbox's
    warning go (default: stderr); `environ`: where $RLMX_MODEL and the providers' keys are looked for
    when choosing the model (default: os.environ)."""
    from rlmx.config import choose_models, load_config, model_refs
    from rlmx.context.prefilter import Prefilter
    from rlmx.pricing import Pricing

    say = say or to_stderr
    cfg = config if config is not None else load_config(options.config_file)
    check_base_url(options.base_url)
    choice = choose_models(options.model, options.sub_model, cfg, environ, base_url=options.base_url)
    limits = cfg.make_limits(choice.limits, **dict(options.limits))
    sandbox = sandbox_settings(options.sandbox, cfg.sandbox)
    if sandbox.backend in SANDBOX_WARNINGS:
        say(SANDBOX_WARNINGS[sandbox.backend])
    tools, sub_tools = configured_tools(cfg, options.tools, options.sub_tools)
    mcp_servers = configured_mcp(cfg, options.mcp)
    Prefilter.parse(options.prefilter)  # refused here, before the context is read
    output = schema_of(options.output_schema)
    if choice.note:
        say(choice.note)  # once per run, even with --quiet: it explains the answer
    refs = model_refs(
        cfg,
        choice,
        dict(options.models_by_depth),
        base_url=options.base_url,
        concurrency=options.concurrency,
        api_key=api_key_of(options),
        sampling=options.sampling,
        sub_sampling=options.sub_sampling,
        depth_sampling=dict(options.sampling_by_depth),
        limiters=limiters,
    )
    append = options.system_prompt_append
    spec = RunSpec(
        refs.root,
        sub_model=refs.sub,
        models_by_depth=dict(refs.by_depth),
        cache=(cfg.cache_path or True) if (options.cache or cfg.cache_enabled) else None,
        limits=limits,
        trace=options.trace if options.trace is not None else True,
        pricer=Pricing({**cfg.prices, **options.prices}),
        allow_unpriced=options.allow_unpriced,
        prefilter=options.prefilter,
        excerpt_chars=2_000 if options.excerpt_chars is None else options.excerpt_chars,
        sandbox=sandbox,
        allow_empty_context=options.allow_empty_context,
        prompt=options.prompt or cfg.prompt or "rlmx",
        tools=tools,
        sub_tools=sub_tools,
        system_prompt_append=read_append(append) if append is not None else cfg.system_prompt_append,
        output=output,
        mcp_servers=mcp_servers,
    )
    return BuiltSpec(spec, choice.note, choice.embedded)


def check_base_url(value: str | None, field: str = "base_url") -> None:
    """Refuse a base URL that is not http(s)://HOST[...] before any model call."""
    if value is None:
        return
    try:
        parsed = urlparse(value)
        host = parsed.hostname
    except ValueError:  # e.g. an unclosed [IPv6 bracket
        host = None
    if not host or parsed.scheme not in ("http", "https"):
        raise ConfigError(f"`{field}`={value} is not a URL: give one like http://127.0.0.1:8080/v1")


def api_key_of(options: RunOptions) -> str | None:
    """The key `api_key_env` names (refused when that variable is not set)."""
    if options.api_key_env is None:
        return None
    key = os.environ.get(options.api_key_env)
    if not key:
        raise ConfigError(f"`api_key_env` names {options.api_key_env}, which is not set")
    return key


def configured_tools(
    cfg: Any, extra: tuple[str, ...], sub_tools: tuple[str, ...] | None = None
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """The config's tools plus `extra`, as references, every module imported here (so a bad one is
    refused before any model call); children take `sub_tools` (else the config's) when given."""
    from rlmx.tools import load_configured

    sub = cfg.sub_tools if sub_tools is None else sub_tools
    load_configured(cfg.tools, sub, extra)
    root = (*cfg.tools, *extra)
    return (root or None), (None if sub is None else tuple(sub))


def configured_mcp(cfg: Any, extra: tuple[str, ...]) -> list[str] | None:
    """The config's `mcp` files plus `extra`, each read and checked here (a bad one is refused before
    any model call; `${VAR}`s are expanded again where the servers start)."""
    files = list(
        dict.fromkeys([*getattr(cfg, "mcp", ()), *(str(Path(p).expanduser().resolve()) for p in extra)])
    )
    if not files:
        return None
    from rlmx.mcp.config import load_servers, require_sdk

    require_sdk()
    load_servers(files)
    return files


def schema_of(value: Any) -> dict[str, Any] | None:
    """An output schema: a JSON schema dict, or the path of a file holding one."""
    if value is None or isinstance(value, dict):
        return value
    from rlmx.typed import load_schema_file

    return load_schema_file(str(value))


def is_built_in(prompt: str) -> bool:
    """Whether `prompt` names a built-in prompt profile (not a template file)."""
    from rlmx.engine.profiles import BUILT_IN

    return str(prompt) in BUILT_IN


def read_append(value: str) -> str:
    """`system_prompt_append`: the text itself, or "@FILE" for a file's text."""
    if not value.startswith("@"):
        return value
    path = Path(value[1:]).expanduser()
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"`system_prompt_append`: cannot read {path}: {exc.strerror or exc}") from exc


def to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
