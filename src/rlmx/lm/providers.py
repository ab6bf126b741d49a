"""What rlmx knows about each provider, as data: one record per provider, with its factory named by
import path (so nothing here, nor in the registry, imports a provider's code or SDK until a model of
that provider is asked for). The price catalog, the CLI's default-model choice and the docs read the
same records."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlmx.lm.base import LM
    from rlmx.lm.options import ModelOptions

# builds the LM for `model` (the text after "provider:") from the user's options and the record
ProviderFactory = Callable[[str, "ModelOptions", "ProviderRecord"], "LM"]

STANDARD_CACHED_AT = ("prompt_tokens_details", "cached_tokens")  # where OpenAI reports cache reads


@dataclass(frozen=True)
class Quirks:
    """Where a provider departs from OpenAI's chat-completions API in ways an RLM run notices. Each field
    is data some code reads: the usage reader of compatible providers (`cached_tokens_at`,
    `output_left_out_of_completion`), the request builder (`unknown_fields_rejected`), the docs table and
    the tests (all of them). `sources` names the provider documentation (or the recorded reply) each
    fact comes from; `unverified` says which of them could not be checked against that documentation."""

    # the path inside the reply's `usage` object where cache reads are counted
    cached_tokens_at: tuple[str, ...] = STANDARD_CACHED_AT
    # `completion_tokens` leaves out output the provider still bills (thinking tokens), which
    # `total_tokens` includes: the difference is booked as output and as reasoning tokens
    output_left_out_of_completion: bool = False
    # any body field the provider does not know is a 400, so rlmx sends only the chat fields
    unknown_fields_rejected: bool = False
    error_body: str = "object"  # "array": error replies are a JSON list of {"error": {...}} objects
    rejected_params: tuple[str, ...] = ()  # body fields it answers with a 400 (rlmx sends none of them)
    reasoning_effort: str = ""  # what it accepts as `reasoning_effort`, where that is documented
    notes: str = ""
    sources: tuple[str, ...] = ()
    unverified: str = ""


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
    more_key_envs: tuple[str, ...] = ()  # further key variables, read in order when `key_env` is unset
    endpoint: str = ""  # where it connects, in words, when no single default base URL says it
    quirks: Quirks = Quirks()

    def load(self) -> ProviderFactory:
        if callable(self.factory):
            return self.factory
        module, _, function = self.factory.partition(":")
        built: ProviderFactory = getattr(importlib.import_module(module), function)
        return built

    @property
    def key_envs(self) -> tuple[str, ...]:
        """Every variable its key is read from, in the order they are tried."""
        return ((self.key_env,) if self.key_env else ()) + self.more_key_envs

    def key_from(self, environ: Mapping[str, str]) -> tuple[str, str] | None:
        """(variable, key) of the first of `key_envs` that is set in `environ`; None when none is."""
        for name in self.key_envs:
            value = environ.get(name)
            if value:
                return name, value
        return None

    @property
    def where(self) -> str:
        """Where its models connect by default, for messages and the docs."""
        return self.base_url or self.endpoint or "its SDK's default endpoint"


COMPATIBLE = "rlmx.lm.compatible:compatible_model"

GEMINI_DOCS = "https://ai.google.dev/gemini-api/docs/openai"

# The OpenAI-compatible clouds reached by name: a default base URL, a key variable, a catalog id, and
# what each does differently (see Quirks; docs/providers.md lists them with their sources).
CLOUDS: tuple[ProviderRecord, ...] = (
    ProviderRecord(
        "gemini",
        COMPATIBLE,
        key_env="GEMINI_API_KEY",
        more_key_envs=("GOOGLE_API_KEY",),
        base_url="https://generativelanguage.googleapis.com/v1beta/openai/",
        key_required=True,
        price_id="google",
        help="Google Gemini through its OpenAI-compatible endpoint (key: GEMINI_API_KEY, else GOOGLE_API_KEY)",
        example="gemini:gemini-2.5-flash",
        quirks=Quirks(
            output_left_out_of_completion=True,
            unknown_fields_rejected=True,
            error_body="array",
            reasoning_effort='"none" (thinking off), "low", "medium", "high"',
            notes="an unknown body field is a 400 (`Invalid JSON payload received. Unknown name ...`); "
            "errors come as a JSON array of error objects; thinking tokens are in total_tokens but not "
            "in completion_tokens",
            sources=(
                GEMINI_DOCS,
                "error bodies: replies recorded in github.com/n4ze3m/page-assist/issues/406 (429) and "
                "github.com/MinLL/SkyrimNet-GamePlugin/issues/77 (400, unknown fields)",
                "usage: a reply recorded in github.com/openai/openai-python/issues/2544",
            ),
            unverified="the error-body shape and the thinking tokens missing from completion_tokens come "
            "from replies recorded by others, not from Google's documentation",
        ),
    ),
    ProviderRecord(
        "groq",
        COMPATIBLE,
        key_env="GROQ_API_KEY",
        base_url="https://api.groq.com/openai/v1",
        key_required=True,
        price_id="groq",
        help="Groq",
        example="groq:llama-3.3-70b-versatile",
        quirks=Quirks(
            rejected_params=("logprobs", "logit_bias", "top_logprobs", "messages[].name", "n (other than 1)"),
            notes="temperature 0 is sent on as 1e-8",
            sources=("https://console.groq.com/docs/openai", "https://console.groq.com/docs/prompt-caching"),
        ),
    ),
    ProviderRecord(
        "together",
        COMPATIBLE,
        key_env="TOGETHER_API_KEY",
        base_url="https://api.together.ai/v1",
        key_required=True,
        price_id="together",
        help="Together AI",
        example="together:meta-llama/Llama-3.3-70B-Instruct-Turbo",
        quirks=Quirks(
            sources=("https://docs.together.ai/docs/inference/openai-compatibility",),
            unverified="where Together reports cached tokens (read at the OpenAI place)",
        ),
    ),
    ProviderRecord(
        "fireworks",
        COMPATIBLE,
        key_env="FIREWORKS_API_KEY",
        base_url="https://api.fireworks.ai/inference/v1",
        key_required=True,
        price_id="fireworks",
        help="Fireworks AI (model names are accounts/fireworks/models/NAME)",
        example="fireworks:accounts/fireworks/models/gpt-oss-120b",
        quirks=Quirks(
            notes="prompt caching is on by default; cached prompt tokens are billed lower",
            sources=("https://docs.fireworks.ai/guides/prompt-caching",),
            unverified="the field of the usage object that carries cached tokens (read at the OpenAI place)",
        ),
    ),
    ProviderRecord(
        "deepseek",
        COMPATIBLE,
        key_env="DEEPSEEK_API_KEY",
        base_url="https://api.deepseek.com/v1",
        key_required=True,
        price_id="deepseek",
        help="DeepSeek",
        example="deepseek:deepseek-chat",
        quirks=Quirks(
            cached_tokens_at=("prompt_cache_hit_tokens",),
            notes="cache hits are usage.prompt_cache_hit_tokens (misses: prompt_cache_miss_tokens; "
            "prompt_tokens is their sum); deepseek-reasoner ignores temperature",
            sources=("https://api-docs.deepseek.com/guides/kv_cache",),
            unverified="that deepseek-reasoner ignores temperature rather than rejecting it",
        ),
    ),
    ProviderRecord(
        "mistral",
        COMPATIBLE,
        key_env="MISTRAL_API_KEY",
        base_url="https://api.mistral.ai/v1",
        key_required=True,
        price_id="mistral",
        help="Mistral AI",
        example="mistral:mistral-large-latest",
        quirks=Quirks(
            notes="cached prompt tokens are billed at 10% of the input price",
            sources=("https://docs.mistral.ai/studio-api/conversations/advanced/prompt-caching",),
            unverified="the usage field that carries cached tokens (read at the OpenAI place), and "
            "whether unknown body fields are rejected",
        ),
    ),
    ProviderRecord(
        "xai",
        COMPATIBLE,
        key_env="XAI_API_KEY",
        base_url="https://api.x.ai/v1",
        key_required=True,
        price_id="x-ai",
        help="xAI (Grok)",
        example="xai:grok-4",
        quirks=Quirks(
            reasoning_effort="model-dependent; some reasoning models reject the parameter",
            sources=("https://docs.x.ai/developers/advanced-api-usage/prompt-caching/usage-and-pricing",),
            unverified="which models reject reasoning_effort",
        ),
    ),
    ProviderRecord(
        "cerebras",
        COMPATIBLE,
        key_env="CEREBRAS_API_KEY",
        base_url="https://api.cerebras.ai/v1",
        key_required=True,
        price_id="cerebras",
        help="Cerebras",
        example="cerebras:gpt-oss-120b",
        quirks=Quirks(
            rejected_params=(
                "frequency_penalty",
                "presence_penalty",
                "logit_bias",
                "parallel_tool_calls",
                "service_tier",
            ),
            sources=("https://inference-docs.cerebras.ai/resources/openai",),
            unverified="the rejected fields are listed by third-party guides citing Cerebras' docs; where "
            "Cerebras reports cached tokens (read at the OpenAI place)",
        ),
    ),
)

BUILT_IN: tuple[ProviderRecord, ...] = (
    ProviderRecord(
        "openai",
        COMPATIBLE,
        key_env="OPENAI_API_KEY",
        base_env="OPENAI_BASE_URL",
        key_required=True,
        price_id="openai",
        endpoint="https://api.openai.com/v1",
        help="OpenAI, or any OpenAI-compatible endpoint with `base_url`",
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
        endpoint="$AZURE_OPENAI_ENDPOINT (required)",
        help="Azure OpenAI: the model is your deployment name; needs AZURE_OPENAI_ENDPOINT",
        example="azure:my-gpt-5-mini-deployment",
    ),
    *CLOUDS,
    ProviderRecord(
        "litellm",
        "rlmx.lm.litellm_lm:litellm_model",
        endpoint="the model's own provider, through LiteLLM (`base_url` becomes its api_base)",
        help="any LiteLLM model string: bedrock/..., vertex_ai/..., and 100+ more (rlmx[litellm]); "
        "LiteLLM reads each provider's credentials itself",
        example="litellm:bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        settings={
            # the catalog id of each LiteLLM route ("bedrock/MODEL" is priced as aws's MODEL); a model
            # genai-prices lacks is priced from LiteLLM's own price map (`cost`)
            "price_routes": {
                "bedrock": "aws",
                "vertex_ai": "google",
                "gemini": "google",
                "openai": "openai",
                "anthropic": "anthropic",
                "azure": "azure",
                "groq": "groq",
                "together_ai": "together",
                "fireworks_ai": "fireworks",
                "deepseek": "deepseek",
                "mistral": "mistral",
                "xai": "x-ai",
                "cerebras": "cerebras",
                "openrouter": "openrouter",
                "cohere": "cohere",
                "perplexity": "perplexity",
            },
            "cost": "rlmx.lm.litellm_lm:litellm_cost",
        },
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
        "rlmx.lm.llama_cpp:llama_cpp_model",
        local=True,
        endpoint="in-process, no server",
        help="a GGUF file run in-process by llama-cpp-python (rlmx[local]); 'smollm2' is the built-in demo model",
        example="local:smollm2",
    ),
)


def built_in(name: str) -> ProviderRecord:
    """The built-in record of provider `name` (for a provider's module to read its own facts)."""
    return next(record for record in BUILT_IN if record.name == name)
