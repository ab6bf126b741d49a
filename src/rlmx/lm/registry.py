"""Model strings `provider:model` -> LM objects, through the table of provider records (lm/providers.py).
The registry imports no provider: each record names its factory, imported when a model needs it.

Only the CLI/config layer (and `RLM` when given a string) uses this; everything else takes LM objects.
"""

from __future__ import annotations

from collections.abc import Callable

from rlmx.errors import ConfigError
from rlmx.lm.base import LM
from rlmx.lm.options import ModelOptions
from rlmx.lm.providers import BUILT_IN, ProviderFactory, ProviderRecord

PROVIDERS: dict[str, ProviderRecord] = {record.name: record for record in BUILT_IN}


def register_provider(
    name: str,
    factory: Callable[[str, ModelOptions], LM] | str,
    *,
    key_env: str | None = None,
    help: str = "",
    example: str = "",
    default_model: str | None = None,
    default_sub_model: str | None = None,
    price_id: str | None = None,
    local: bool = False,
) -> ProviderRecord:
    """Add (or replace) a provider; model strings `NAME:model` then resolve through `factory(model,
    options)` (a callable, or "module:function" imported on first use)."""
    if callable(factory):
        plain = factory

        def build(model: str, options: ModelOptions, record: ProviderRecord) -> LM:
            return plain(model, options)

        made: ProviderFactory | str = build
    else:
        made = factory
    record = ProviderRecord(
        name,
        made,
        key_env=key_env,
        help=help,
        example=example,
        default_model=default_model,
        default_sub_model=default_sub_model,
        price_id=price_id,
        local=local,
    )
    PROVIDERS[name] = record
    return record


def provider_of(model_name: str) -> ProviderRecord | None:
    """The record of the provider a `provider:model` name belongs to, if rlmx knows it."""
    return PROVIDERS.get(model_name.partition(":")[0])


def resolve_model(spec: str | LM, options: ModelOptions | None = None) -> LM:
    if not isinstance(spec, str):
        return spec
    options = options or ModelOptions()
    if ":" not in spec:
        raise ConfigError(f"model {spec!r} has no provider; write it as provider:model, e.g. openai:{spec}")
    provider_name, model = spec.split(":", 1)
    record = PROVIDERS.get(provider_name)
    if record is None:
        raise ConfigError(
            f"unknown provider {provider_name!r} in {spec!r}; known: {', '.join(sorted(PROVIDERS))}"
        )
    if not model:
        raise ConfigError(f"model string {spec!r} names no model; e.g. {provider_name}:MODEL")
    lm = record.load()(model, options, record)
    if options.vision is not None:
        lm.vision = options.vision  # type: ignore[attr-defined]  # a declaration rlmx.images.vision reads
    return lm


__all__ = ["PROVIDERS", "ModelOptions", "ProviderRecord", "provider_of", "register_provider", "resolve_model"]
