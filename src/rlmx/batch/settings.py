"""What each item of a batch runs with, settled on the driver before anything runs: one `RunSpec` per
distinct item setting (the batch's RLM or options, with the item's own model, limits and schema), each
built into an RLM once here so a bad model, key, limit or schema is refused up front; the models'
fleet-wide rate limits and the environment variables workers need."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from rlmx.batch.executor import Plan
from rlmx.batch.fleet import BatchLimits, RateSpec
from rlmx.batch.item_run import rlm_key
from rlmx.batch.items import BatchInputError, BatchItem
from rlmx.errors import ConfigError, RLMError
from rlmx.spec.options import RunOptions, build_spec, schema_of
from rlmx.spec.run import RunSpec

Say = Any


@dataclass
class ItemSettings:
    """The batch's base: a spec (an `RLM` or `RunSpec` given in Python) or `RunOptions` (the command
    line's, translated with the configuration files for each item setting)."""

    spec: RunSpec | None = None
    options: RunOptions | None = None
    config: Any = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    gitignore: bool = True
    _specs: dict[str, RunSpec] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        rlm: Any,
        options: RunOptions | None,
        *,
        include: tuple[str, ...] = (),
        exclude: tuple[str, ...] = (),
        gitignore: bool = True,
    ) -> ItemSettings:
        from rlmx.config import Config, load_config

        if options is not None:
            options = options.portable()  # what workers must see, whatever their working directory
            return cls(
                options=options,
                config=load_config(options.config_file),
                include=options.include,
                exclude=options.exclude,
                gitignore=options.gitignore,
            )
        if not isinstance(rlm, RunSpec):
            raise ConfigError(f"rlmx.batch.run: `rlm` must be an RLM or a RunSpec, not {type(rlm).__name__}")
        return cls(
            spec=rlm.snapshot(), config=Config(), include=include, exclude=exclude, gitignore=gitignore
        )

    @property
    def allow_empty_context(self) -> bool:
        if self.options is not None:
            return self.options.allow_empty_context
        return self.spec is not None and self.spec.allow_empty_context

    def context_options(self) -> dict[str, Any]:
        return {
            "include": self.include,
            "exclude": self.exclude,
            "gitignore": self.gitignore,
            "allow_empty_context": self.allow_empty_context,
        }

    def spec_for(self, item: BatchItem, say: Say) -> RunSpec:
        """The spec of `item`'s setting (made once per setting)."""
        key = rlm_key(item)
        if key not in self._specs:
            self._specs[key] = self._make(item, say)
        return self._specs[key]

    def _make(self, item: BatchItem, say: Say) -> RunSpec:
        if self.options is not None:
            options = self.options.replace(
                model=item.model or self.options.model,
                sub_model=item.sub_model or self.options.sub_model,
                limits=dict(item.limits),
                output_schema=self.options.output_schema
                if item.output_schema is None
                else item.output_schema,
            )
            return build_spec(options, say=say, config=self.config).spec
        assert self.spec is not None
        changes: dict[str, Any] = {}
        if item.model is not None:
            changes["model"] = item.model
        if item.sub_model is not None:
            changes["sub_model"] = item.sub_model
        if item.limits:
            changes["limits"] = dict(item.limits)
        if item.output_schema is not None:
            changes["output"] = schema_of(item.output_schema)
        return self.spec.replace(**changes) if changes else self.spec


def validate(items: list[BatchItem], plan: Plan, settings: ItemSettings, say: Say) -> set[str]:
    """Build each distinct item setting's RLM once here, so a bad model, key, limit or schema is refused
    before anything runs (notes said once); check every context. Fills `plan.specs`; returns the models
    the batch uses."""
    from rlmx.rlm import RLM

    problems: list[str] = []
    models: set[str] = set()
    said: set[str] = set()

    def once(line: str) -> None:
        if line not in said:
            said.add(line)
            say(line)

    seen: dict[str, str | None] = {}
    for item in items:
        key = rlm_key(item)
        if key not in seen:
            try:
                spec = settings.spec_for(item, once)
                rlm = RLM.from_spec(spec)
                seen[key] = None
            except RLMError as exc:
                seen[key] = str(exc)
            else:
                plan.specs[key] = spec
                models.update(rlm.model_names)
                check_prices(rlm, plan.limits)  # about an option, not the line: raised as is
        if seen[key] is not None:
            problems.append(f"line {item.line}: {seen[key]}")
    problems += plan.contexts.check(items)
    if problems:
        raise BatchInputError("batch input", problems)
    return models


def check_prices(rlm: Any, limits: BatchLimits) -> None:
    """Under a batch cost limit every model must have a price (else the budget cannot hold)."""
    if limits.max_cost_usd is None or rlm.allow_unpriced:
        return
    from rlmx.pricing import default_pricing, is_priced, price_hint

    pricer = rlm.pricer or default_pricing()
    unpriced = [name for name in rlm.model_names if not is_priced(pricer, name)]
    if unpriced:
        raise ConfigError(
            f"`batch_max_cost_usd` cannot be enforced: no price known for {', '.join(unpriced)}; give "
            f"{unpriced[0]} a price ({price_hint(unpriced[0])}, USD per million tokens) or pass "
            "`allow_unpriced`=True"
        )


def rates_for(models: set[str], cfg: Any, rpm: int | None, tpm: int | None) -> dict[str, RateSpec]:
    """Each model's fleet-wide rate limit: `rpm`/`tpm`, else its provider's in the config (`cfg`)."""
    if (rpm is not None and rpm < 1) or (tpm is not None and tpm < 1):
        raise ConfigError("`rpm` and `tpm` must be at least 1")
    rates = {}
    for model in sorted(models):
        section = cfg.providers.get(model.split(":", 1)[0], {})
        spec = RateSpec(
            rpm if rpm is not None else section.get("requests_per_minute"),
            tpm if tpm is not None else section.get("tokens_per_minute"),
        )
        if spec.rpm is not None or spec.tpm is not None:
            rates[model] = spec
    return rates


def model_env(models: set[str], cfg: Any = None) -> dict[str, str]:
    """The environment variables workers need to reach `models` (their keys and endpoints, and the
    config's `api_key_env` names), taken from this process's environment: what the ray executor sends
    sealed, never in task arguments."""
    from rlmx.lm.registry import PROVIDERS

    names: set[str] = set()
    for model in models:
        provider = model.split(":", 1)[0]
        record = PROVIDERS.get(provider)
        if record is not None:
            names.update(n for n in (record.key_env, record.base_env, *record.more_key_envs) if n)
        key_env = cfg.providers.get(provider, {}).get("api_key_env") if cfg is not None else None
        if key_env:
            names.add(key_env)
    return {name: os.environ[name] for name in sorted(names) if os.environ.get(name)}
