"""The factory of every provider that speaks the OpenAI chat-completions API (openai, openrouter, the
named clouds — gemini, groq, together, fireworks, deepseek, mistral, xai, cerebras —, ollama, vllm,
llamacpp, and any endpoint given with --base-url): an `OpenAICompatLM` configured from the provider's
record and the user's options, reading usage the way the record's quirks say."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from rlmx.errors import ConfigError
from rlmx.lm.base import Usage
from rlmx.lm.openai_compat import OpenAICompatLM, UsageReader, usage_of
from rlmx.lm.options import ModelOptions
from rlmx.lm.providers import STANDARD_CACHED_AT, ProviderRecord, Quirks
from rlmx.lm.sampling import check_accepted


def compatible_model(model: str, options: ModelOptions, record: ProviderRecord) -> OpenAICompatLM:
    env_base = os.environ.get(record.base_env) if record.base_env else None
    base_url = options.base_url or env_base or record.base_url
    found = record.key_from(os.environ)
    api_key = options.api_key or (found[1] if found else None)
    if record.key_required and not api_key and not (options.base_url or env_base):
        raise ConfigError(missing_key(record, model, base_url))
    check_accepted(options.sampling(), record, model)  # a setting the record says it refuses: now
    own_endpoint = base_url == record.base_url  # the provider's own API, not a server found elsewhere
    extra_body = record.settings.get("extra_body") if own_endpoint else None
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
        extra_body=None if record.quirks.unknown_fields_rejected else extra_body,
        usage_reader=usage_reader(record.quirks),
    )


def missing_key(record: ProviderRecord, model: str, base_url: str | None) -> str:
    """The error for a provider that needs a key and has none: the provider, its URL, the variables."""
    variables = " or ".join(record.key_envs) or "an API key"
    first = record.key_envs[0] if record.key_envs else "API_KEY"
    return (
        f"no API key for {record.name}:{model} at {base_url or record.where}: set {variables} "
        f"(e.g. export {first}=...), put api_key under [providers.{record.name}] in rlmx.toml, "
        "or point at a compatible server with `base_url`"
    )


def usage_reader(quirks: Quirks) -> UsageReader:
    """How to read a reply's usage for a provider with these quirks (the plain reader when it has none)."""
    if quirks.cached_tokens_at == STANDARD_CACHED_AT and not quirks.output_left_out_of_completion:
        return usage_of

    def read(raw: Any) -> Usage:
        return quirky_usage(raw, quirks)

    return read


def quirky_usage(raw: Any, quirks: Quirks) -> Usage:
    """`usage_of(raw)`, with cached tokens taken from where the provider reports them (falling back to
    OpenAI's place when that is absent), and output that `completion_tokens` left out but `total_tokens`
    counts booked as output and reasoning (Gemini's thinking tokens)."""
    usage = usage_of(raw)
    if not isinstance(raw, dict):
        return usage
    cached = _at(raw, quirks.cached_tokens_at)
    if cached is not None:
        usage = replace(
            usage, cached_tokens=min(cached, usage.input_tokens) if usage.input_tokens else cached
        )
    if quirks.output_left_out_of_completion:
        hidden = (_at(raw, ("total_tokens",)) or 0) - usage.input_tokens - usage.output_tokens
        if hidden > 0:  # a reasoning count the provider did give is the same tokens, not more of them
            usage = replace(
                usage,
                output_tokens=usage.output_tokens + hidden,
                reasoning_tokens=max(usage.reasoning_tokens, hidden),
            )
    return usage


def _at(raw: dict[str, Any], path: tuple[str, ...]) -> int | None:
    value: Any = raw
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)
