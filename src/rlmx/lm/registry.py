"""Model strings `provider:model` -> LM objects, through a registry of small provider plugins.

Only the CLI/config layer (and `RLM` when given a string) uses this; everything else takes LM objects.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from rlmx.errors import ConfigError
from rlmx.lm.base import LM
from rlmx.lm.openai_compat import OpenAICompatLM


@dataclass(frozen=True)
class ModelOptions:
    """What a user may say about how to reach a model, beyond its name."""

    base_url: str | None = None
    api_key: str | None = None
    concurrency: int = 32
    timeout_s: float = 600.0
    extra: dict[str, str] = field(default_factory=dict)


ProviderFactory = Callable[[str, ModelOptions], LM]


@dataclass(frozen=True)
class Provider:
    name: str
    factory: ProviderFactory
    key_env: str | None
    help: str


PROVIDERS: dict[str, Provider] = {}


def register_provider(
    name: str, factory: ProviderFactory, *, key_env: str | None = None, help: str = ""
) -> None:
    PROVIDERS[name] = Provider(name, factory, key_env, help)


def resolve_model(spec: str | LM, options: ModelOptions | None = None) -> LM:
    if not isinstance(spec, str):
        return spec
    options = options or ModelOptions()
    if ":" not in spec:
        raise ConfigError(f"model {spec!r} has no provider; write it as provider:model, e.g. openai:{spec}")
    provider_name, model = spec.split(":", 1)
    provider = PROVIDERS.get(provider_name)
    if provider is None:
        raise ConfigError(
            f"unknown provider {provider_name!r} in {spec!r}; known: {', '.join(sorted(PROVIDERS))}"
        )
    if not model:
        raise ConfigError(f"model string {spec!r} names no model; e.g. {provider_name}:MODEL")
    return provider.factory(model, options)


def _compatible(
    provider: str,
    *,
    key_env: str | None,
    base_env: str | None,
    default_base: str | None,
    key_required: bool,
    max_tokens_param: str = "max_tokens",
) -> ProviderFactory:
    def factory(model: str, options: ModelOptions) -> LM:
        base_url = options.base_url or (os.environ.get(base_env) if base_env else None) or default_base
        api_key = options.api_key or (os.environ.get(key_env) if key_env else None)
        if key_required and not api_key and not options.base_url:
            raise ConfigError(
                f"no API key for {provider}:{model}: set {key_env} (e.g. export {key_env}=sk-...), "
                "or point at a compatible server with --base-url"
            )
        return OpenAICompatLM(
            model,
            name=f"{provider}:{model}",
            base_url=base_url,
            api_key=api_key,
            concurrency=options.concurrency,
            timeout_s=options.timeout_s,
            # compatible servers (llama.cpp, vLLM, ...) know max_tokens; OpenAI's own API prefers the new name
            max_tokens_param=max_tokens_param if base_url == default_base else "max_tokens",
        )

    return factory


register_provider(
    "openai",
    _compatible(
        "openai",
        key_env="OPENAI_API_KEY",
        base_env="OPENAI_BASE_URL",
        default_base=None,
        key_required=True,
        max_tokens_param="max_completion_tokens",
    ),
    key_env="OPENAI_API_KEY",
    help="OpenAI, or any OpenAI-compatible endpoint with --base-url",
)
register_provider(
    "openrouter",
    _compatible(
        "openrouter",
        key_env="OPENROUTER_API_KEY",
        base_env=None,
        default_base="https://openrouter.ai/api/v1",
        key_required=True,
    ),
    key_env="OPENROUTER_API_KEY",
    help="OpenRouter (provider-reported cost is used)",
)
register_provider(
    "ollama",
    _compatible(
        "ollama",
        key_env=None,
        base_env="OLLAMA_BASE_URL",
        default_base="http://localhost:11434/v1",
        key_required=False,
    ),
    help="a local Ollama server",
)
register_provider(
    "vllm",
    _compatible(
        "vllm",
        key_env="VLLM_API_KEY",
        base_env="VLLM_BASE_URL",
        default_base="http://localhost:8000/v1",
        key_required=False,
    ),
    help="a vLLM OpenAI-compatible server",
)
register_provider(
    "llamacpp",
    _compatible(
        "llamacpp",
        key_env=None,
        base_env="LLAMACPP_BASE_URL",
        default_base="http://localhost:8080/v1",
        key_required=False,
    ),
    help="a llama.cpp server (llama-server or llama_cpp.server)",
)
