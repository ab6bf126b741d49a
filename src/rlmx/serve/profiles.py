"""Profiles: the named RLM set-ups a server offers (root model, sub model, depth, limits).

From a TOML file (`--profiles FILE`)::

    [defaults]                       # optional; every profile starts from these
    base_url = "http://127.0.0.1:8080/v1"

    [profiles.gpt-5-mini]            # served as the model "rlmx/gpt-5-mini"
    model = "openai:gpt-5-mini"
    sub_model = "openai:gpt-5-nano"
    max_depth = 1
    max_llm_calls = 200
    max_cost_usd = 1.0
    timeout_s = 900

or from command-line flags (one profile named after the model). A caller may lower a profile's limits for
one run (`max_depth`, `budget_usd`, ...) but never raise them.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlmx.errors import ConfigError
from rlmx.limits import Limits
from rlmx.lm.base import LM
from rlmx.lm.registry import ModelOptions, resolve_model
from rlmx.rlm import RLM
from rlmx.sandbox.base import SandboxSettings

PREFIX = "rlmx/"
LIMIT_KEYS = {f.name for f in dataclasses.fields(Limits)}
MODEL_KEYS = {"model", "sub_model", "base_url", "api_key_env", "concurrency", "description"}
# what a caller may lower per run, and the Limits field it lowers
OVERRIDES = {
    "max_depth": "max_depth",
    "max_iterations": "max_iterations",
    "max_llm_calls": "max_llm_calls",
    "max_total_tokens": "max_total_tokens",
    "budget_usd": "max_cost_usd",
    "max_cost_usd": "max_cost_usd",
    "timeout_s": "timeout_s",
}


@dataclass
class Profile:
    name: str
    model: str
    sub_model: str | None = None
    limits: Limits = field(default_factory=Limits)
    options: ModelOptions = field(default_factory=ModelOptions)
    description: str = ""
    _lms: tuple[LM, LM | None] | None = field(default=None, repr=False)

    @property
    def served_name(self) -> str:
        return PREFIX + self.name

    def models(self) -> tuple[LM, LM | None]:
        """The profile's LM objects, made once and shared by all runs (so per-model concurrency holds)."""
        if self._lms is None:
            root = resolve_model(self.model, self.options)
            sub = resolve_model(self.sub_model, self.options) if self.sub_model else None
            self._lms = (root, sub)
        return self._lms

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
        try:
            return dataclasses.replace(self.limits, **changes)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc

    def rlm(
        self,
        *,
        limits: Limits | None = None,
        on_event: Any = None,
        trace: bool = True,
        sandbox: SandboxSettings | None = None,
    ) -> RLM:
        root, sub = self.models()
        return RLM(
            root,
            sub_model=sub,
            limits=limits or self.limits,
            trace=trace,
            on_event=on_event,
            sandbox=sandbox or SandboxSettings(),
        )


def profile_from_table(name: str, table: dict[str, Any]) -> Profile:
    unknown = set(table) - LIMIT_KEYS - MODEL_KEYS
    if unknown:
        raise ConfigError(
            f"profile {name!r}: unknown keys {', '.join(sorted(unknown))}; known: "
            f"{', '.join(sorted(LIMIT_KEYS | MODEL_KEYS))}"
        )
    model = table.get("model")
    if not isinstance(model, str) or not model:
        raise ConfigError(f'profile {name!r} needs model = "provider:model"')
    key_env = table.get("api_key_env")
    api_key = os.environ.get(key_env) if isinstance(key_env, str) else None
    if key_env and not api_key:
        raise ConfigError(f"profile {name!r}: api_key_env names {key_env}, which is not set")
    try:
        limits = Limits(**{k: v for k, v in table.items() if k in LIMIT_KEYS})
        options = ModelOptions(
            base_url=table.get("base_url"), api_key=api_key, concurrency=int(table.get("concurrency", 32))
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"profile {name!r}: {exc}") from exc
    return Profile(
        name=name,
        model=model,
        sub_model=table.get("sub_model"),
        limits=limits,
        options=options,
        description=str(table.get("description", "")),
    )


def load_profiles(path: str | Path) -> dict[str, Profile]:
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
    defaults = data.get("defaults", {})
    tables = data.get("profiles")
    if not isinstance(tables, dict) or not tables:
        raise ConfigError(f"config {path} defines no [profiles.NAME] table")
    return {name: profile_from_table(name, {**defaults, **table}) for name, table in tables.items()}


def profile_from_flags(
    model: str | None,
    *,
    name: str | None,
    sub_model: str | None,
    base_url: str | None,
    limits: Limits,
) -> Profile:
    model = model or os.environ.get("RLMX_MODEL")
    if not model:
        raise ConfigError(
            "no model configured: pass --model PROVIDER:MODEL (e.g. openai:gpt-5-mini), set RLMX_MODEL, "
            "or give profiles with --profiles FILE"
        )
    return Profile(
        name=name or model.split(":", 1)[-1],
        model=model,
        sub_model=sub_model or os.environ.get("RLMX_SUB_MODEL"),
        limits=limits,
        options=ModelOptions(base_url=base_url),
    )


def find_profile(profiles: dict[str, Profile], requested: str | None) -> Profile:
    """`rlmx/NAME`, `NAME`, or nothing (the only profile / the first one)."""
    if not requested:
        return next(iter(profiles.values()))
    name = requested[len(PREFIX) :] if requested.startswith(PREFIX) else requested
    if name in profiles:
        return profiles[name]
    served = ", ".join(p.served_name for p in profiles.values())
    raise ConfigError(f"the model {requested!r} does not exist on this server; it serves: {served}")
