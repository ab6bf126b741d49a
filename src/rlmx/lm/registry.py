"""Model strings `provider:model` -> LM objects, through a registry of small provider plugins.

Only the CLI/config layer (and `RLM` when given a string) uses this; everything else takes LM objects.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlmx.errors import ConfigError
from rlmx.lm.base import LM
from rlmx.lm.openai_compat import OpenAICompatLM
from rlmx.lm.options import ModelOptions

ProviderFactory = Callable[[str, ModelOptions], LM]


@dataclass(frozen=True)
class Provider:
    """A provider plugin: how to build its models, and what a user needs to know about it."""

    name: str
    factory: ProviderFactory
    key_env: str | None
    help: str
    example: str = ""  # a model string that works with this provider
    default_model: str | None = None  # used when only this provider's key is configured
    default_sub_model: str | None = None


PROVIDERS: dict[str, Provider] = {}


def register_provider(
    name: str,
    factory: ProviderFactory,
    *,
    key_env: str | None = None,
    help: str = "",
    example: str = "",
    default_model: str | None = None,
    default_sub_model: str | None = None,
) -> None:
    """Add (or replace) a provider; model strings `NAME:model` then resolve through `factory`."""
    PROVIDERS[name] = Provider(name, factory, key_env, help, example, default_model, default_sub_model)


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
    extra_body: dict[str, Any] | None = None,
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
            retry=options.retry,
            limiter=options.limiter(),
            # compatible servers (llama.cpp, vLLM, ...) know max_tokens; OpenAI's own API prefers the new name
            max_tokens_param=max_tokens_param if base_url == default_base else "max_tokens",
            extra_body=extra_body if base_url == default_base else None,
        )

    return factory


def _anthropic(model: str, options: ModelOptions) -> LM:
    from rlmx.lm.anthropic import anthropic_model  # the SDK is an optional extra: rlmx[anthropic]

    return anthropic_model(model, options)


def _azure(model: str, options: ModelOptions) -> LM:
    from rlmx.lm.azure import azure_model

    return azure_model(model, options)


def _local(model: str, options: ModelOptions) -> LM:
    from rlmx.lm.local import local_model  # llama-cpp-python is an optional extra: rlmx[local]

    return local_model(model, options)


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
    example="openai:gpt-5-mini",
    default_model="openai:gpt-5-mini",
    default_sub_model="openai:gpt-5-nano",
)
register_provider(
    "anthropic",
    _anthropic,
    key_env="ANTHROPIC_API_KEY",
    help="Anthropic's Messages API (official SDK, prompt caching of the stable prefix); rlmx[anthropic]",
    example="anthropic:claude-sonnet-4-5",
    default_model="anthropic:claude-sonnet-4-5",
    default_sub_model="anthropic:claude-haiku-4-5",
)
register_provider(
    "openrouter",
    _compatible(
        "openrouter",
        key_env="OPENROUTER_API_KEY",
        base_env=None,
        default_base="https://openrouter.ai/api/v1",
        key_required=True,
        extra_body={"usage": {"include": True}},
    ),
    key_env="OPENROUTER_API_KEY",
    help="OpenRouter (provider-reported cost is used)",
    example="openrouter:openai/gpt-5-mini",
    default_model="openrouter:openai/gpt-5-mini",
    default_sub_model="openrouter:openai/gpt-5-nano",
)
register_provider(
    "azure",
    _azure,
    key_env="AZURE_OPENAI_API_KEY",
    help="Azure OpenAI: the model is your deployment name; needs AZURE_OPENAI_ENDPOINT",
    example="azure:my-gpt-5-mini-deployment",
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
    example="ollama:qwen3:8b",
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
    key_env="VLLM_API_KEY",
    help="a vLLM OpenAI-compatible server",
    example="vllm:Qwen/Qwen3-8B",
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
    example="llamacpp:smollm2",
)
register_provider(
    "local",
    _local,
    help="a GGUF file run in-process by llama-cpp-python (rlmx[local]); 'smollm2' is the built-in demo model",
    example="local:smollm2",
)
