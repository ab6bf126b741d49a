"""What a model call costs, in USD.

Prices come from the `genai-prices` catalog (offline, maintained upstream; rlmx keeps no price table of
its own). A per-model override (`--price MODEL=IN,OUT`, the config file, or `Pricing(overrides=...)`)
wins over the catalog. A model the catalog lacks is priced by its provider's own price map where the
provider's record names one (LiteLLM's, for `litellm:` models). A provider-reported cost (OpenRouter's
`usage.cost`) wins over all of them; that choice is made by the engine (`RunState.cost_of`), which only
asks a pricer when the provider said nothing.

Token conventions (rlmx's `Usage`, the OpenAI convention): `input_tokens` includes `cached_tokens`,
which are billed at the model's cache-read price, and `cache_write_tokens` (Anthropic's prompt-cache
writes), billed at the catalog's cache-write price where it has one (else as input; an override `Price`
bills them as input); `output_tokens` includes `reasoning_tokens`, which are billed as output.

    pricing = Pricing({"openai:my-finetune": Price(0.3, 1.2)})
    pricing("openai:gpt-4o-mini", Usage(input_tokens=1000, output_tokens=200))   # -> 0.00027
    pricing("vllm:my-model", Usage(...))                                          # -> None (unknown)
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlmx.errors import ConfigError
from rlmx.limits import Limits
from rlmx.lm.base import Usage
from rlmx.lm.registry import PROVIDERS, provider_of

# genai-prices ids of model-name prefixes rlmx has no provider record for (a caller's own LM may be named
# "vertex:..." or "bedrock:..."); a registered provider's record (rlmx.lm.providers) says its own
# `price_id` and `local` (gemini -> google, xai -> x-ai, ...).
CATALOG_ALIASES: dict[str, str] = {
    "google": "google",
    "vertex": "google",
    "x-ai": "x-ai",
    "bedrock": "aws",
    "aws": "aws",
    "cohere": "cohere",
    "perplexity": "perplexity",
}
PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    """USD per million tokens. Cached input defaults to the full input price (the cautious choice)."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None

    def __post_init__(self) -> None:
        values = (self.input_per_mtok, self.output_per_mtok, self.cached_input_per_mtok)
        if any(v is not None and v < 0 for v in values):
            raise ConfigError(f"prices must be >= 0 USD per million tokens, got {self}")

    def cost(self, usage: Usage) -> float:
        cached = min(usage.cached_tokens, usage.input_tokens)
        cached_price = (
            self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        )
        return (
            (usage.input_tokens - cached) * self.input_per_mtok
            + cached * cached_price
            + usage.output_tokens * self.output_per_mtok
        ) / PER_MILLION


def parse_price_spec(spec: str) -> tuple[str, Price]:
    """`MODEL=IN,OUT[,CACHED]` (USD per million tokens) -> (model, Price)."""
    model, sep, numbers = spec.rpartition("=")
    parts = [p.strip() for p in numbers.split(",")] if sep else []
    if not model.strip() or len(parts) not in (2, 3):
        raise ConfigError(
            f"bad price {spec!r}: write MODEL=IN,OUT in USD per million tokens, e.g. openai:my-model=0.5,1.5"
        )
    try:
        values = [float(p) for p in parts]
    except ValueError as exc:
        raise ConfigError(f"bad price {spec!r}: {exc}; write e.g. openai:my-model=0.5,1.5") from exc
    return model.strip(), Price(*values)


def parse_price_specs(specs: list[str]) -> dict[str, Price]:
    return dict(parse_price_spec(spec) for spec in specs)


def price_from_config(value: Any, model: str) -> Price:
    """A config-file entry: `[in, out]`, `[in, out, cached]` or `{input=..., output=..., cached_input=...}`."""
    try:
        if isinstance(value, Mapping):
            return Price(
                float(value["input"]),
                float(value["output"]),
                None if value.get("cached_input") is None else float(value["cached_input"]),
            )
        if isinstance(value, (list, tuple)) and len(value) in (2, 3):
            return Price(*(float(v) for v in value))
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"bad price for {model!r} in the config: {exc}") from exc
    raise ConfigError(
        f"bad price for {model!r} in the config: use [input, output] USD per million tokens or "
        "{input = ..., output = ...}"
    )


def split_model(name: str) -> tuple[str, str]:
    provider, sep, model = name.partition(":")
    return (provider.lower(), model) if sep else ("", name)


class Pricing:
    """A pricer `(model_name, Usage) -> USD | None`: overrides, then local (free), then genai-prices."""

    def __init__(self, overrides: Mapping[str, Price] | None = None, *, catalog: bool = True) -> None:
        self.overrides = dict(overrides or {})
        self.catalog = catalog
        self._not_in_catalog: set[str] = set()  # a catalog miss is slow (a scan) and never changes

    def __call__(self, model: str, usage: Usage) -> float | None:
        price = self.override_for(model)
        if price is not None:
            return price.cost(usage)
        if runs_locally(model):
            return 0.0
        if not self.catalog:
            return None
        if model not in self._not_in_catalog:
            cost = catalog_cost(model, usage)
            if cost is not None:
                return cost
            self._not_in_catalog.add(model)
        return provider_cost(model, usage)

    def override_for(self, model: str) -> Price | None:
        if model in self.overrides:
            return self.overrides[model]
        _, bare = split_model(model)
        return self.overrides.get(bare)

    def source(self, model: str) -> str | None:
        """Where this model's price comes from, for messages; None when it has none."""
        if self.override_for(model) is not None:
            return "override"
        if runs_locally(model):
            return "local (free)"
        if not self.catalog:
            return None
        sample = Usage(input_tokens=1, output_tokens=1)
        if catalog_cost(model, sample) is not None:
            return "genai-prices"
        if provider_cost(model, sample) is not None:
            record = provider_of(model)
            return f"{record.name if record else 'the provider'}'s price map"
        return None


def runs_locally(model: str) -> bool:
    """A model its provider's record marks local (ollama, llamacpp, local): no per-token price."""
    record = provider_of(model)
    return record is not None and record.local


def catalog_id(provider: str) -> str | None:
    """The genai-prices provider id of a model-name prefix: its record's, else a known alias."""
    record = PROVIDERS.get(provider)
    return record.price_id if record is not None else CATALOG_ALIASES.get(provider)


def catalog_ref(model: str) -> tuple[str, str] | None:
    """(genai-prices provider id, model id) of a `provider:model` name, or None when it has none. A
    provider that routes to others by a first path segment (`litellm:bedrock/MODEL`) says in its record
    which catalog provider each route is (`settings["price_routes"]`)."""
    provider, bare = split_model(model)
    record = PROVIDERS.get(provider)
    routes = record.settings.get("price_routes") if record is not None else None
    if routes:
        route, _, rest = bare.partition("/")
        provider_id = routes.get(route) if rest else None
        return (provider_id, rest) if provider_id else None
    provider_id = catalog_id(provider)
    return (provider_id, bare) if provider_id and bare else None


def catalog_cost(model: str, usage: Usage) -> float | None:
    """The genai-prices price of `usage` for a `provider:model` name; None when the catalog lacks it."""
    ref = catalog_ref(model)
    if ref is None:
        return None
    provider_id, bare = ref
    try:
        import genai_prices
    except ImportError:  # pragma: no cover - a core dependency, but a broken install should not crash runs
        return None
    cached = min(usage.cached_tokens, usage.input_tokens)
    written = min(usage.cache_write_tokens, usage.input_tokens - cached)
    request = genai_prices.Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the catalog warns about stale snapshots; prices still apply
            result = genai_prices.calc_price(request, bare, provider_id=provider_id)
    except LookupError:
        return None
    return float(result.total_price)


def provider_cost(model: str, usage: Usage) -> float | None:
    """The price a provider's own price map gives, for a model genai-prices lacks: its record names the
    function (`settings["cost"]`, "module:function" taking the bare model and the usage); None without one."""
    provider, bare = split_model(model)
    record = PROVIDERS.get(provider)
    where = record.settings.get("cost") if record is not None else None
    if not where or not bare:
        return None
    module, _, function = str(where).partition(":")
    cost: float | None = getattr(importlib.import_module(module), function)(bare, usage)
    return cost


def is_priced(pricer: Any, model: str) -> bool:
    """Whether `pricer` can price `model` (it returns a number for a sample usage)."""
    if pricer is None:
        return False
    return pricer(model, Usage(input_tokens=1_000, output_tokens=1_000)) is not None


_DEFAULT: list[Pricing] = []


def default_pricing() -> Pricing:
    """The catalog-only pricer every run uses unless given one (shared, so its miss memo is too)."""
    if not _DEFAULT:
        _DEFAULT.append(Pricing())
    return _DEFAULT[0]


def price_hint(model: str) -> str:
    """How to give `model` a price, in the library's terms (the command line shows its --price)."""
    return f"`pricer`=Pricing({{{model!r}: Price(IN, OUT)}})"


def budget_warnings(unpriced: list[str], limits: Limits) -> list[str]:
    """The run's warnings about models without a price (only under `max_cost_usd`)."""
    return [unpriced_warning(unpriced, limits)] if unpriced and limits.max_cost_usd is not None else []


def unpriced_warning(models: list[str], limits: Limits, *, refused: bool = False) -> str:
    """One line: which models have no price, what that means for `max_cost_usd`, and how to fix it."""
    names = ", ".join(models)
    fix = f"give {models[0]} a price ({price_hint(models[0])}, USD per million tokens)"
    if refused:
        return (
            f"`max_cost_usd`={limits.max_cost_usd} cannot be enforced: no price is known for {names}; {fix}, "
            "or run anyway with `allow_unpriced`=True"
        )
    budget = limits.max_cost_usd
    return f"no price is known for {names}: its calls are not counted against max_cost_usd={budget}"


def catalog_sees_images(model: str) -> bool | None:
    """True when the price catalog prices image input for this `provider:model` (it then takes images);
    None otherwise: the catalog's silence says nothing either way (rlmx.images.vision decides)."""
    ref = catalog_ref(model)
    if ref is None:
        return None
    provider_id, bare = ref
    try:
        from genai_prices.data_snapshot import get_snapshot

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, info = get_snapshot().find_provider_model(bare, None, provider_id, None)
    except (ImportError, LookupError):
        return None
    prices = info.prices if isinstance(info.prices, list) else [info.prices]
    for price in prices:
        found = getattr(price, "prices", price)
        if getattr(found, "input_image_mtok", None) is not None:
            return True
    return None
