"""Azure OpenAI: the openai SDK's Azure client behind the same retrying model class.

`azure:DEPLOYMENT` calls `{endpoint}/openai/deployments/DEPLOYMENT/chat/completions?api-version=...`
with an `api-key` header. The endpoint comes from --base-url, `[providers.azure] base_url` or
AZURE_OPENAI_ENDPOINT; the key from AZURE_OPENAI_API_KEY (or the config file); the API version from
`[providers.azure] api_version`, AZURE_OPENAI_API_VERSION or OPENAI_API_VERSION.
"""

from __future__ import annotations

import os

import openai

from rlmx.errors import ConfigError
from rlmx.lm.openai_compat import OpenAICompatLM, http_client, with_known_platform
from rlmx.lm.options import ModelOptions
from rlmx.lm.providers import ProviderRecord, built_in

RECORD = built_in("azure")
KEY_ENV, ENDPOINT_ENV = str(RECORD.key_env), str(RECORD.base_env)
VERSION_ENVS = ("AZURE_OPENAI_API_VERSION", "OPENAI_API_VERSION")
DEFAULT_API_VERSION = "2024-10-21"


def azure_model(
    deployment: str, options: ModelOptions, record: ProviderRecord | None = None
) -> OpenAICompatLM:
    """The registry's factory for `azure:DEPLOYMENT`."""
    endpoint = options.base_url or os.environ.get(ENDPOINT_ENV)
    if not endpoint:
        raise ConfigError(
            f"no endpoint for azure:{deployment}: set {ENDPOINT_ENV} (e.g. https://NAME.openai.azure.com) "
            "or give `base_url`"
        )
    api_key = options.api_key or os.environ.get(KEY_ENV)
    if not api_key:
        raise ConfigError(f"no API key for azure:{deployment}: set {KEY_ENV} or put it in rlmx.toml")
    version = options.extra.get("api_version") or next(
        (v for v in (os.environ.get(name) for name in VERSION_ENVS) if v), DEFAULT_API_VERSION
    )

    def client(lm: OpenAICompatLM) -> openai.AsyncOpenAI:
        return with_known_platform(
            openai.AsyncAzureOpenAI(
                azure_endpoint=endpoint,
                api_key=api_key,
                api_version=version,
                max_retries=0,
                timeout=lm.timeout_s,
                http_client=http_client(endpoint),  # TLS context chosen as for the other providers
            )
        )

    return OpenAICompatLM(
        deployment,
        name=f"azure:{deployment}",
        base_url=endpoint,
        api_key=api_key,
        **options.transport(),
        max_tokens_param="max_completion_tokens",
        client_factory=client,
    )
