"""What rlmx knows about each provider, as data: one record per provider, with its factory named by
import path (so nothing here, nor in the registry, imports a provider's code or SDK until a model of
that provider is asked for). The price catalog, the CLI's default-model choice and the docs read the
same records."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlmx.lm.base import LM
    from rlmx.lm.options import ModelOptions

# builds the LM for `model` (the text after "provider:") from the user's options and the record
ProviderFactory = Callable[[str, "ModelOptions", "ProviderRecord"], "LM"]


@dataclass(frozen=True)
class ProviderRecord:
    """Everything a provider is. `factory` is "module:function" (loaded on first use) or a callable."""

    name: str
    factory: str | ProviderFactory
    key_env: str | None = None  # the environment variable holding its API key
    base_env: str | None = None  # an environment variable that overrides its base URL
    base_url: str | None = None  # its default endpoint (None: the SDK's own default)
    key_required: bool = False  # refuse at construction without a key (unless a base URL is given)
    price_id: str | None = None  # its id in the genai-prices catalog; None: priced by overrides only
    local: bool = False  # runs on the user's machine: no per-token price
    help: str = ""
    example: str = ""  # a model string that works with this provider
    default_model: str | None = None  # used when only this provider's key is configured
    default_sub_model: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # provider-specific (e.g. max_tokens_param)

    def load(self) -> ProviderFactory:
        if callable(self.factory):
            return self.factory
        module, _, function = self.factory.partition(":")
        built: ProviderFactory = getattr(importlib.import_module(module), function)
        return built


COMPATIBLE = "rlmx.lm.compatible:compatible_model"

BUILT_IN: tuple[ProviderRecord, ...] = (
    ProviderRecord(
        "openai",
        COMPATIBLE,
        key_env="OPENAI_API_KEY",
        base_env="OPENAI_BASE_URL",
        key_required=True,
        price_id="openai",
        help="OpenAI, or any OpenAI-compatible endpoint with --base-url",
        example="openai:gpt-5-mini",
        default_model="openai:gpt-5-mini",
        default_sub_model="openai:gpt-5-nano",
        settings={"max_tokens_param": "max_completion_tokens"},
    ),
    ProviderRecord(
        "anthropic",
        "rlmx.lm.anthropic:anthropic_model",
        key_env="ANTHROPIC_API_KEY",
        base_env="ANTHROPIC_BASE_URL",
        base_url="https://api.anthropic.com",
        key_required=True,
        price_id="anthropic",
        help="Anthropic's Messages API (official SDK, prompt caching of the stable prefix); rlmx[anthropic]",
        example="anthropic:claude-sonnet-4-5",
        default_model="anthropic:claude-sonnet-4-5",
        default_sub_model="anthropic:claude-haiku-4-5",
    ),
    ProviderRecord(
        "openrouter",
        COMPATIBLE,
        key_env="OPENROUTER_API_KEY",
        base_url="https://openrouter.ai/api/v1",
        key_required=True,
        price_id="openrouter",
        help="OpenRouter (provider-reported cost is used)",
        example="openrouter:openai/gpt-5-mini",
        default_model="openrouter:openai/gpt-5-mini",
        default_sub_model="openrouter:openai/gpt-5-nano",
        settings={"extra_body": {"usage": {"include": True}}},
    ),
    ProviderRecord(
        "azure",
        "rlmx.lm.azure:azure_model",
        key_env="AZURE_OPENAI_API_KEY",
        base_env="AZURE_OPENAI_ENDPOINT",
        key_required=True,
        price_id="azure",
        help="Azure OpenAI: the model is your deployment name; needs AZURE_OPENAI_ENDPOINT",
        example="azure:my-gpt-5-mini-deployment",
    ),
    ProviderRecord(
        "ollama",
        COMPATIBLE,
        base_env="OLLAMA_BASE_URL",
        base_url="http://localhost:11434/v1",
        local=True,
        help="a local Ollama server",
        example="ollama:qwen3:8b",
    ),
    ProviderRecord(
        "vllm",
        COMPATIBLE,
        key_env="VLLM_API_KEY",
        base_env="VLLM_BASE_URL",
        base_url="http://localhost:8000/v1",
        help="a vLLM OpenAI-compatible server",
        example="vllm:Qwen/Qwen3-8B",
    ),
    ProviderRecord(
        "llamacpp",
        COMPATIBLE,
        base_env="LLAMACPP_BASE_URL",
        base_url="http://localhost:8080/v1",
        local=True,
        help="a llama.cpp server (llama-server or llama_cpp.server)",
        example="llamacpp:smollm2",
    ),
    ProviderRecord(
        "local",
        "rlmx.lm.local:local_model",
        local=True,
        help="a GGUF file run in-process by llama-cpp-python (rlmx[local]); 'smollm2' is the built-in demo model",
        example="local:smollm2",
    ),
)


def built_in(name: str) -> ProviderRecord:
    """The built-in record of provider `name` (for a provider's module to read its own facts)."""
    return next(record for record in BUILT_IN if record.name == name)
