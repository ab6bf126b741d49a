"""The factory of every provider that speaks the OpenAI chat-completions API (openai, openrouter,
ollama, vllm, llamacpp, and any endpoint given with --base-url): an `OpenAICompatLM` configured from the
provider's record and the user's options."""

from __future__ import annotations

import os

from rlmx.errors import ConfigError
from rlmx.lm.openai_compat import OpenAICompatLM
from rlmx.lm.options import ModelOptions
from rlmx.lm.providers import ProviderRecord


def compatible_model(model: str, options: ModelOptions, record: ProviderRecord) -> OpenAICompatLM:
    env_base = os.environ.get(record.base_env) if record.base_env else None
    base_url = options.base_url or env_base or record.base_url
    api_key = options.api_key or (os.environ.get(record.key_env) if record.key_env else None)
    if record.key_required and not api_key and not options.base_url:
        raise ConfigError(
            f"no API key for {record.name}:{model}: set {record.key_env} (e.g. export {record.key_env}=sk-...), "
            "or point at a compatible server with --base-url"
        )
    own_endpoint = base_url == record.base_url  # the provider's own API, not a server found elsewhere
    return OpenAICompatLM(
        model,
        name=f"{record.name}:{model}",
        base_url=base_url,
        api_key=api_key,
        **options.transport(),
        # compatible servers (llama.cpp, vLLM, ...) know max_tokens; OpenAI's own API prefers the new name
        max_tokens_param=record.settings.get("max_tokens_param", "max_tokens")
        if own_endpoint
        else "max_tokens",
        extra_body=record.settings.get("extra_body") if own_endpoint else None,
    )
