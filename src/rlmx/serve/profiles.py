"""Profiles: the named RLM set-ups a server offers (root model, sub model, depth, limits).

Every profile stands on the configuration `rlmx ask` reads (rlmx.config: `~/.config/rlmx/config.toml`,
`./rlmx.toml`, `--config FILE`): provider settings and keys, prices, per-depth models, the response
cache, and `[limits]` as the starting limits. Which profiles a server offers (the first that applies):

1. `--profiles FILE`: its `[profiles.NAME]` tables, each over the file's optional `[defaults]`;
2. `--model`: one profile from the command-line flags;
3. `[profiles.NAME]` tables in the config files;
4. one profile with the model `rlmx ask` would use ($RLMX_MODEL, `model` in the config, a provider
   whose key is set, else the embedded demo model).

A profile table::

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
    system_prompt_append = "Answer in French."
    tools = ["mytools:TOOLS"]        # the user's tools in the REPL (docs/tools.md); sub_tools for children

`models_by_depth` entries are model strings or tables with sampling settings, as in the config file
(docs/providers.md); the profile's sampling settings, `prompt` and `system_prompt_append` stand over the
config file's, and so do `tools` / `sub_tools` over the config file's top-level ones (a server's `--tools`
adds to every profile's). The prompt profile and the tools' modules are read when the server starts, so a
bad one stops it there.

A caller may lower a profile's limits for one run (`max_depth`, `budget_usd`, ...) but never raise them.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlmx.config import (
    SUB_SAMPLING_KEYS,
    Config,
    ModelChoice,
    ResolvedModels,
    choose_models,
    depth_entries,
    resolve_models,
    sampling_tables,
    tool_specs,
)
from rlmx.engine.profiles import PromptProfile
from rlmx.errors import ConfigError
from rlmx.limits import Limits
from rlmx.lm.cache import ResponseCache
from rlmx.lm.sampling import SAMPLING_KEYS, SETTING_FLAGS, Sampling
from rlmx.pricing import Pricing
from rlmx.rlm import RLM
from rlmx.sandbox.base import SandboxSettings

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
FLAG_NAMES = {"timeout_s": "--timeout"}  # a Limits field whose command-line flag is not --field-name


@dataclass
class Profile:
    """One served set-up. `config` supplies what the profile does not say (provider settings and keys,
    prices, per-depth models, the response cache); `base_url`, `api_key` and `concurrency` override the
    provider settings for every model of the profile."""

    name: str
    model: str
    sub_model: str | None = None
    limits: Limits = field(default_factory=Limits)
    description: str = ""
    models_by_depth: dict[int, str] = field(default_factory=dict)  # over the config's [models_by_depth]
    config: Config = field(default_factory=Config)
    base_url: str | None = None
    api_key: str | None = None
    concurrency: int | None = None
    sampling: Sampling = field(default_factory=Sampling)  # the root model's, over the config's
    sub_sampling: Sampling = field(default_factory=Sampling)  # the sub-model's, over the config's
    sampling_by_depth: dict[int, Sampling] = field(default_factory=dict)  # over the config's
    prompt: str | None = None  # the prompt profile: "rlmx" (None), "official" or a template file
    system_prompt_append: str = ""
    tools: tuple[str, ...] = ()  # "MODULE:ATTR" specs (rlmx.tools.load_tools), imported by tool_sets()
    sub_tools: tuple[str, ...] | None = None  # the children's, when they differ
    _models: ResolvedModels | None = field(default=None, repr=False)
    _tool_sets: tuple[Any, Any] | None = field(default=None, repr=False)
    _prompt: PromptProfile | None = field(default=None, repr=False)
    _cache: ResponseCache | None = field(default=None, repr=False)
    _pricer: Pricing | None = field(default=None, repr=False)

    @property
    def served_name(self) -> str:
        return PREFIX + self.name

    def models(self) -> ResolvedModels:
        """The profile's LM objects, made once and shared by all runs (so per-model concurrency holds).
        The commands call it at start-up, so a missing key or an unknown provider fails then."""
        if self._models is None:
            models = resolve_models(
                self.config,
                ModelChoice(self.model, self.sub_model),
                self.models_by_depth,
                base_url=self.base_url,
                concurrency=self.concurrency,
                api_key=self.api_key,
                sampling=self.sampling,
                sub_sampling=self.sub_sampling,
                depth_sampling=self.sampling_by_depth,
            )
            if self.config.cache_enabled:
                self._cache = ResponseCache(self.config.cache_path)
            self._pricer = Pricing(self.config.prices)
            self._models = models
        return self._models

    def prompt_profile(self) -> PromptProfile:
        """The profile's prompt profile, read once (a template file at start-up, as the commands call
        it there) and shared by all runs; ConfigError naming it when it cannot be read."""
        if self._prompt is None:
            try:
                self._prompt = PromptProfile.of(self.prompt or "rlmx", append=self.system_prompt_append)
            except ConfigError as exc:
                raise ConfigError(f"profile {self.name!r}: {exc}") from exc
        return self._prompt

    def tool_sets(self) -> tuple[Any, Any]:
        """The profile's (tools, sub_tools), imported once (the commands call it at start-up, so a module
        that cannot be imported stops the server there) and shared by all runs."""
        if self._tool_sets is None:
            if not self.tools and self.sub_tools is None:
                self._tool_sets = (None, None)
            else:
                from rlmx.tools import load_configured

                try:
                    self._tool_sets = load_configured(self.tools, self.sub_tools)
                except ConfigError as exc:
                    raise ConfigError(f"profile {self.name!r}: {exc}") from exc
        return self._tool_sets

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
        models = self.models()
        tools, sub_tools = self.tool_sets()
        return RLM(
            models.root,
            sub_model=models.sub,
            models_by_depth=dict(models.by_depth),
            limits=limits or self.limits,
            trace=trace,
            on_event=on_event,
            sandbox=sandbox or SandboxSettings(),
            pricer=self._pricer,
            cache=self._cache,
            prompt=self.prompt_profile(),  # carries system_prompt_append
            tools=tools,
            sub_tools=sub_tools,
        )


def profile_from_table(
    name: str, table: Mapping[str, Any], config: Config | None = None, extra_tools: tuple[str, ...] = ()
) -> Profile:
    """A `[profiles.NAME]` table; its limits start from the config's `[limits]`. `extra_tools`: the
    command line's --tools, added to the profile's own."""
    config = config or Config()
    known = LIMIT_KEYS | MODEL_KEYS | PROMPT_KEYS | TOOL_KEYS
    unknown = set(table) - known
    if unknown:
        raise ConfigError(
            f"profile {name!r}: unknown keys {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}"
        )
    tools = tool_specs(table["tools"], f"profile {name!r}: tools") if "tools" in table else config.tools
    sub_tools = (
        tool_specs(table["sub_tools"], f"profile {name!r}: sub_tools")
        if "sub_tools" in table
        else config.sub_tools
    )
    model = table.get("model")
    if not isinstance(model, str) or not model:
        raise ConfigError(f'profile {name!r} needs model = "provider:model"')
    for key in ("sub_model", "base_url", "api_key_env", "description", *sorted(PROMPT_KEYS)):
        if key in table and not isinstance(table[key], str):
            raise ConfigError(f"profile {name!r}: {key} must be a string")
    concurrency = table.get("concurrency")
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)):
        raise ConfigError(f"profile {name!r}: concurrency must be a whole number")
    key_env = table.get("api_key_env")
    api_key = os.environ.get(key_env) if key_env else None
    if key_env and not api_key:
        raise ConfigError(f"profile {name!r}: api_key_env names {key_env}, which is not set")
    try:
        limits = config.make_limits(None, **{k: v for k, v in table.items() if k in LIMIT_KEYS})
    except (ConfigError, TypeError) as exc:
        raise ConfigError(f"profile {name!r}: {exc}") from exc
    sampling, sub_sampling = sampling_tables(table, f"profile {name!r}")
    depth_models, depth_sampling = depth_entries(
        f"profile {name!r}: models_by_depth", table.get("models_by_depth", {})
    )
    return Profile(
        name=name,
        model=model,
        sub_model=table.get("sub_model"),
        limits=limits,
        description=str(table.get("description", "")),
        models_by_depth=depth_models,
        config=config,
        base_url=table.get("base_url"),
        api_key=api_key,
        concurrency=concurrency,
        sampling=sampling,
        sub_sampling=sub_sampling,
        sampling_by_depth=depth_sampling,
        prompt=table.get("prompt", config.prompt),
        system_prompt_append=table.get("system_prompt_append", config.system_prompt_append),
        tools=(*tools, *extra_tools),
        sub_tools=sub_tools,
    )


def load_profiles(
    path: str | Path, config: Config | None = None, extra_tools: tuple[str, ...] = ()
) -> dict[str, Profile]:
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
            "[profiles.NAME]); provider settings and prices go in a config file (--config FILE)"
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


def choose_profiles(
    config: Config,
    *,
    profiles_file: str | Path | None = None,
    model: str | None = None,
    sub_model: str | None = None,
    base_url: str | None = None,
    name: str | None = None,
    limits: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    sampling: Sampling | None = None,
    sub_sampling: Sampling | None = None,
    prompt: str | None = None,
    system_prompt_append: str | None = None,
    tools: tuple[str, ...] = (),
) -> tuple[dict[str, Profile], str | None]:
    """The profiles `rlmx serve` / `rlmx mcp` offer (the order is in the module docstring), and the
        one-time note when rlmx picked the model itself. `limits`: the flags' Limits values (None = not given);
        `sampling` / `sub_sampling`: the root's and the sub-model's sampling flags; `prompt` and
        `system_prompt_append` (its text, @FILE already read): the prompt flags (None = not given); `tools`: the
    --tools given, added to every profile's."""
    given = {k: v for k, v in (limits or {}).items() if v is not None}
    sampling, sub_sampling = sampling or Sampling(), sub_sampling or Sampling()
    if profiles_file is not None or (model is None and config.profiles):
        flags = {"--sub-model": sub_model, "--base-url": base_url, "--name": name, "--prompt": prompt}
        flags["--system-prompt-append"] = system_prompt_append
        flags |= {FLAG_NAMES.get(k, "--" + k.replace("_", "-")): v for k, v in given.items()}
        flags |= {SETTING_FLAGS[k][0]: v for k, v in sampling.body().items()}
        flags |= {SETTING_FLAGS[k][1]: v for k, v in sub_sampling.body().items()}
        if model is not None:
            flags["--model"] = model
        stray = [flag for flag, value in flags.items() if value is not None]
        where = f"--profiles {profiles_file}" if profiles_file is not None else "[profiles] in the config"
        if stray:
            raise ConfigError(
                f"{stray[0]} describes the profile made from --model; the profiles come from {where}: "
                "set it in a profile table instead"
            )
        if profiles_file is not None:
            return load_profiles(profiles_file, config, tools), None
        return {n: profile_from_table(n, table, config, tools) for n, table in config.profiles.items()}, None
    choice = choose_models(model, sub_model, config, environ, base_url=base_url)
    profile = Profile(
        name=name or choice.model.split(":", 1)[-1],
        model=choice.model,
        sub_model=choice.sub_model,
        limits=config.make_limits(choice.limits, **given),
        config=config,
        base_url=base_url,
        sampling=sampling,
        sub_sampling=sub_sampling,
        prompt=prompt or config.prompt,
        system_prompt_append=config.system_prompt_append
        if system_prompt_append is None
        else system_prompt_append,
        tools=(*config.tools, *tools),
        sub_tools=config.sub_tools,
    )
    return {profile.name: profile}, choice.note


def find_profile(profiles: dict[str, Profile], requested: str | None) -> Profile:
    """`rlmx/NAME`, `NAME`, or nothing (the only profile / the first one)."""
    if not requested:
        return next(iter(profiles.values()))
    name = requested[len(PREFIX) :] if requested.startswith(PREFIX) else requested
    if name in profiles:
        return profiles[name]
    served = ", ".join(p.served_name for p in profiles.values())
    raise ConfigError(f"the model {requested!r} does not exist on this server; it serves: {served}")
