"""Profiles: the named RLM set-ups a server offers (root model, sub model, depth, limits).

Every profile stands on the configuration `rlmx ask` reads (rlmx.config: `~/.config/rlmx/config.toml`,
`./rlmx.toml`, `--config FILE`): provider settings and keys, prices, per-depth models, the response
cache, and `[limits]` as the starting limits. Which profiles a server offers (the first that applies):

1. `--profiles FILE`: its `[profiles.NAME]` tables, each over the file's optional `[defaults]`;
2. `--model`: one profile from the command-line flags;
3. `[profiles.NAME]` tables in the config files;
4. one profile with the model `rlmx ask` would use ($RLMX_MODEL, `model` in the config, a provider
   whose key is set, else the embedded demo model).

A profile table's keys are `RunOptions` names (rlmx.spec.options): each profile holds the options its
table (or the command line) states and gets its `RunSpec` from the one translation layer, `build_spec`,
once, at start-up. A profile table::

    [profiles.gpt-5-mini]            # served as the model "rlmx/gpt-5-mini"
    model = "openai:gpt-5-mini"
    sub_model = "openai:gpt-5-nano"
    max_depth = 1
    max_llm_calls = 200
    max_cost_usd = 1.0
    timeout_s = 900
    temperature = 0.2                # the root model's sampling (also top_p, reasoning_effort)
    sub_temperature = 0.7            # the sub-model's (also sub_top_p, sub_reasoning_effort)
    prompt = "official"              # the prompt profile: rlmx, official or a template file
    system_prompt_append = "Answer in French."   # or "@FILE": that file's text
    tools = ["mytools:TOOLS"]        # the user's tools in the REPL (docs/tools.md); sub_tools for children

`models_by_depth` entries are model strings or tables with sampling settings, as in the config file
(docs/providers.md); the profile's sampling settings, `prompt` and `system_prompt_append` stand over the
config file's, and so do `tools` / `sub_tools` over the config file's top-level ones (a server's `--tools`
adds to every profile's). The models, the prompt profile and the tools' modules are made or read when the
server starts (so a bad one stops it there) and shared by every run of the profile: a model's concurrency
limit holds across them.

A caller may lower a profile's limits for one run (`max_depth`, `budget_usd`, ...) but never raise them.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlmx.config import (
    SUB_SAMPLING_KEYS,
    Config,
    ResolvedModels,
    depth_entries,
    sampling_tables,
    tool_specs,
)
from rlmx.engine.profiles import PromptProfile
from rlmx.errors import ConfigError
from rlmx.limits import Limits
from rlmx.lm.sampling import SAMPLING_KEYS
from rlmx.rlm import RLM
from rlmx.sandbox.base import SandboxSettings
from rlmx.spec.options import BuiltSpec, RunOptions, build_spec
from rlmx.spec.run import RunSpec

PREFIX = "rlmx/"
LIMIT_KEYS = {f.name for f in dataclasses.fields(Limits)}
MODEL_KEYS = {
    "model",
    "sub_model",
    "models_by_depth",
    "base_url",
    "api_key_env",
    "concurrency",
    "description",
    *SAMPLING_KEYS,
    *SUB_SAMPLING_KEYS,
}
PROMPT_KEYS = {"prompt", "system_prompt_append"}
SANDBOX_KEYS = {"sandbox"}  # a backend's name: process, process-landlock, ... (docs/security.md)
TOOL_KEYS = {"tools", "sub_tools"}
PROFILES_FILE_KEYS = ("defaults", "profiles")
# what a caller may lower per run, and the Limits field it lowers
OVERRIDES = {
    "max_depth": "max_depth",
    "max_iterations": "max_iterations",
    "max_llm_calls": "max_llm_calls",
    "max_total_tokens": "max_total_tokens",
    "budget_usd": "max_cost_usd",
    "max_cost_usd": "max_cost_usd",
    "timeout_s": "timeout_s",
    "max_errors": "max_errors",
}


def quiet(_line: str) -> None:
    """Where build_spec's model note goes for a profile: `choose_profiles` returns it instead."""


@dataclass
class ServedProfile:
    """One served set-up: `options` (what its table or the command line states, in library names) over
    `config` (provider settings and keys, prices, per-depth models, the response cache, `[limits]`).

    Its `spec` is built once, by the one translation layer (rlmx.spec.options.build_spec); `prepare()`
    (the commands call it at start-up, so a missing key, an unknown provider, an unreadable template or a
    tool that cannot be imported fails then) makes what every run shares: the LM objects (one per model
    and settings, so per-model concurrency holds across runs), the response cache, the prompt profile,
    the tools."""

    name: str
    options: RunOptions = field(default_factory=RunOptions)
    description: str = ""
    config: Config = field(default_factory=Config)
    environ: Mapping[str, str] | None = field(default=None, repr=False)  # None: os.environ
    _built: BuiltSpec | None = field(default=None, repr=False)
    _models: ResolvedModels | None = field(default=None, repr=False)
    _prompt: PromptProfile | None = field(default=None, repr=False)
    _tool_sets: tuple[Any, Any] | None = field(default=None, repr=False)
    _base: RunSpec | None = field(default=None, repr=False)

    @property
    def served_name(self) -> str:
        return PREFIX + self.name

    @property
    def built(self) -> BuiltSpec:
        """The profile's spec as build_spec made it (once); a refusal names the profile."""
        if self._built is None:
            try:
                self._built = build_spec(self.options, config=self.config, environ=self.environ, say=quiet)
            except (ConfigError, TypeError) as exc:
                raise ConfigError(f"profile {self.name!r}: {exc}") from exc
        return self._built

    @property
    def spec(self) -> RunSpec:
        """The profile's run as data (models as `ModelRef`s, tools as references)."""
        return self.built.spec

    @property
    def model(self) -> str:
        return str(getattr(self.spec.model, "name", self.spec.model))

    @property
    def sub_model(self) -> str | None:
        sub = self.spec.sub_model
        return None if sub is None else str(getattr(sub, "name", sub))

    @property
    def limits(self) -> Limits:
        return self.spec.limits

    def models(self) -> ResolvedModels:
        """The profile's LM objects, made once from its spec's `ModelRef`s and shared by all runs."""
        if self._models is None:
            from rlmx.lm.registry import resolve_model

            spec, made = self.spec, {}

            def lm(ref: Any) -> Any:
                if id(ref) not in made:
                    made[id(ref)] = resolve_model(ref.name, ref.options)
                return made[id(ref)]

            by_depth = {int(d): lm(ref) for d, ref in spec.models_by_depth.items()}
            self._models = ResolvedModels(lm(spec.model), lm(spec.sub_model or spec.model), by_depth)
        return self._models

    def prompt_profile(self) -> PromptProfile:
        """The profile's prompt profile, read once and shared by all runs; ConfigError naming the
        profile when it cannot be read."""
        if self._prompt is None:
            spec = self.spec
            try:
                self._prompt = PromptProfile.of(spec.prompt, append=spec.system_prompt_append)
            except ConfigError as exc:
                raise ConfigError(f"profile {self.name!r}: {exc}") from exc
        return self._prompt

    def tool_sets(self) -> tuple[Any, Any]:
        """The profile's (tools, sub_tools), imported once and shared by all runs."""
        if self._tool_sets is None:
            from rlmx.tools import load_all

            spec = self.spec
            try:
                self._tool_sets = (
                    load_all(spec.tools) if spec.tools else None,
                    None if spec.sub_tools is None else load_all(spec.sub_tools),
                )
            except ConfigError as exc:
                raise ConfigError(f"profile {self.name!r}: {exc}") from exc
        return self._tool_sets

    def prepare(self) -> RunSpec:
        """The spec every run of this profile starts from: its own, with what all runs share made
        now (LM objects, the opened response cache, the prompt profile, the imported tools)."""
        if self._base is None:
            from rlmx.lm.cache import open_cache

            spec, models = self.spec, self.models()
            tools, sub_tools = self.tool_sets()
            self._base = spec.replace(
                model=models.root,
                sub_model=models.sub,
                models_by_depth=dict(models.by_depth),
                cache=open_cache(spec.cache),
                prompt=self.prompt_profile(),  # carries system_prompt_append
                tools=tools,
                sub_tools=sub_tools,
            )
        return self._base

    def limits_for(self, overrides: dict[str, Any]) -> Limits:
        """The profile's limits, lowered (never raised) by a caller's per-run overrides."""
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            if value is None:
                continue
            target = OVERRIDES.get(key)
            if target is None:
                raise ConfigError(f"unknown run option {key!r}; known: {', '.join(sorted(OVERRIDES))}")
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"run option {key!r} must be a number")
            current = getattr(self.limits, target)
            changes[target] = value if current is None else min(current, value)
            if target not in ("max_cost_usd", "timeout_s"):
                changes[target] = int(changes[target])
        return dataclasses.replace(self.limits, **changes)  # InvalidSettings is a ConfigError

    def rlm(
        self,
        *,
        limits: Limits | None = None,
        on_event: Any = None,
        trace: bool | str | Path = True,
        sandbox: SandboxSettings | None = None,
    ) -> RLM:
        """One run's RLM: the profile's prepared spec with this run's limits, sinks, trace, sandbox."""
        base = self.prepare()
        return RLM.from_spec(
            base.replace(
                limits=limits or base.limits,
                on_event=on_event,
                trace=trace,
                sandbox=sandbox or base.sandbox,
            )
        )


def profile_from_table(
    name: str, table: Mapping[str, Any], config: Config | None = None, extra_tools: tuple[str, ...] = ()
) -> ServedProfile:
    """A `[profiles.NAME]` table (its keys are `RunOptions` names) as a profile, its spec built now;
    its limits start from the config's `[limits]`, and its own `tools` / `sub_tools` replace the
    config's. `extra_tools`: the command line's --tools, added to the profile's own."""
    config = config or Config()
    known = LIMIT_KEYS | MODEL_KEYS | PROMPT_KEYS | TOOL_KEYS | SANDBOX_KEYS
    unknown = set(table) - known
    if unknown:
        raise ConfigError(
            f"profile {name!r}: unknown keys {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}"
        )
    if "tools" in table:  # the profile's own tools stand instead of the config's
        config = dataclasses.replace(config, tools=tool_specs(table["tools"], f"profile {name!r}: tools"))
    sub_tools = (
        tool_specs(table["sub_tools"], f"profile {name!r}: sub_tools") if "sub_tools" in table else None
    )
    model = table.get("model")
    if not isinstance(model, str) or not model:
        raise ConfigError(f'profile {name!r} needs model = "provider:model"')
    for key in ("sub_model", "base_url", "api_key_env", "description", "sandbox", *sorted(PROMPT_KEYS)):
        if key in table and not isinstance(table[key], str):
            raise ConfigError(f"profile {name!r}: {key} must be a string")
    concurrency = table.get("concurrency")
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)):
        raise ConfigError(f"profile {name!r}: concurrency must be a whole number")
    sampling, sub_sampling = sampling_tables(table, f"profile {name!r}")
    depth_models, depth_sampling = depth_entries(
        f"profile {name!r}: models_by_depth", table.get("models_by_depth", {})
    )
    options = RunOptions(
        model=model,
        sub_model=table.get("sub_model"),
        base_url=table.get("base_url"),
        api_key_env=table.get("api_key_env"),
        concurrency=concurrency,
        models_by_depth=depth_models,
        sampling=sampling,
        sub_sampling=sub_sampling,
        sampling_by_depth=depth_sampling,
        limits={k: v for k, v in table.items() if k in LIMIT_KEYS},
        prompt=table.get("prompt"),
        system_prompt_append=table.get("system_prompt_append"),
        tools=tuple(extra_tools),
        sub_tools=sub_tools,
        sandbox=table.get("sandbox"),
    )
    profile = ServedProfile(name, options, description=str(table.get("description", "")), config=config)
    profile.built  # noqa: B018 - built now: a bad limit, key or tool stops the server at start-up
    return profile


def load_profiles(
    path: str | Path, config: Config | None = None, extra_tools: tuple[str, ...] = ()
) -> dict[str, ServedProfile]:
    """Profiles from a TOML file: `[profiles.NAME]` tables over optional `[defaults]`."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config {path} is not valid TOML: {exc}") from exc
    extra = sorted(set(data) - set(PROFILES_FILE_KEYS))
    if extra:
        raise ConfigError(
            f"unknown key {extra[0]!r} in the profiles file {path} (it holds [defaults] and "
            "[profiles.NAME]); provider settings and prices go in a config file (`config_file`)"
        )
    defaults = data.get("defaults", {})
    tables = data.get("profiles")
    if not isinstance(tables, dict) or not tables:
        raise ConfigError(f"config {path} defines no [profiles.NAME] table")
    if not isinstance(defaults, dict) or not all(isinstance(t, dict) for t in tables.values()):
        raise ConfigError(f"config {path}: [defaults] and every [profiles.NAME] must be tables")
    return {
        name: profile_from_table(name, {**defaults, **table}, config, extra_tools)
        for name, table in tables.items()
    }


# what the command line may state about the profile made from `model` (in the order a stray one is named)
FLAG_FIELDS = ("sub_model", "base_url", "prompt", "system_prompt_append")


def stray_fields(options: RunOptions, name: str | None) -> list[str]:
    """The library names of what `options` (and `name`) state about one profile, beside `tools` and
    `config_file` (which hold for every profile)."""
    given = [key for key in FLAG_FIELDS[:2] if getattr(options, key) is not None]
    given += ["name"] if name is not None else []
    given += [key for key in FLAG_FIELDS[2:] if getattr(options, key) is not None]
    given += [key for key, value in options.limits.items() if value is not None]
    given += list(options.sampling.body())
    given += [f"sub_{key}" for key in options.sub_sampling.body()]
    for key in ("models_by_depth", "sampling_by_depth", "prices", "concurrency", "api_key_env"):
        if getattr(options, key):
            given.append(key)
    return given + (["model"] if options.model is not None else [])


def choose_profiles(
    config: Config,
    *,
    profiles_file: str | Path | None = None,
    options: RunOptions | None = None,
    name: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[dict[str, ServedProfile], str | None]:
    """The profiles `rlmx serve` / `rlmx mcp` offer (the order is in the module docstring), each with
    its spec built, and the one-time note when rlmx picked the model itself. `options`: what the
    command line states (a profile of its own when the profiles do not come from a file or the config;
    its `tools` and `mcp` files are added to every profile's); `name`: that profile's name (default:
    the model's)."""
    options = options or RunOptions()
    if options.mcp:  # MCP servers given with the command hold for every profile, as the config's do
        extra = (str(Path(p).expanduser().resolve()) for p in options.mcp)
        config = dataclasses.replace(config, mcp=tuple(dict.fromkeys([*config.mcp, *extra])))
    if profiles_file is not None or (options.model is None and config.profiles):
        stray = stray_fields(options, name)
        where = (
            f"`profiles_file` {profiles_file}" if profiles_file is not None else "[profiles] in the config"
        )
        if stray:
            raise ConfigError(
                f"`{stray[0]}` describes the profile made from `model`; the profiles come from {where}: "
                "set it in a profile table instead"
            )
        if profiles_file is not None:
            return load_profiles(profiles_file, config, options.tools), None
        tables = config.profiles.items()
        return {n: profile_from_table(n, table, config, options.tools) for n, table in tables}, None
    built = build_spec(options, config=config, environ=environ, say=quiet)
    chosen = built.spec.model.name
    profile = ServedProfile(
        name or chosen.split(":", 1)[-1], options, config=config, environ=environ, _built=built
    )
    return {profile.name: profile}, built.note


def find_profile(profiles: dict[str, ServedProfile], requested: str | None) -> ServedProfile:
    """`rlmx/NAME`, `NAME`, or nothing (the only profile / the first one)."""
    if not requested:
        return next(iter(profiles.values()))
    name = requested[len(PREFIX) :] if requested.startswith(PREFIX) else requested
    if name in profiles:
        return profiles[name]
    served = ", ".join(p.served_name for p in profiles.values())
    raise ConfigError(f"the model {requested!r} does not exist on this server; it serves: {served}")
