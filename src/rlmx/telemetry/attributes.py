"""The attribute names rlmx's spans carry, pinned to one version of the OpenTelemetry GenAI semantic
conventions (`SEMCONV_VERSION`), and the helpers that turn trace records into attribute values."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable
from typing import Any

# The GenAI conventions as published in OpenTelemetry semantic conventions 1.37.0 (the version that
# named `gen_ai.provider.name` and the `gen_ai.input.messages` / `gen_ai.output.messages` attributes).
SEMCONV_VERSION = "1.37.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
# the variable the OpenTelemetry GenAI instrumentations read for the same opt-in
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
FINISH_REASONS = "gen_ai.response.finish_reasons"
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
CONVERSATION_ID = "gen_ai.conversation.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"

# gen_ai.provider.name's well-known values, by rlmx provider prefix; others are sent as they are
PROVIDER_NAMES = {
    "gemini": "gcp.gemini",
    "mistral": "mistral_ai",
    "xai": "x_ai",
    "azure": "azure.ai.openai",
    "local": "llama_cpp",
    "llamacpp": "llama_cpp",
}


@functools.cache
def rlmx_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rlmx")
    except PackageNotFoundError:
        return "0"


def capture_from_env(environ: Any = None) -> bool:
    """The opt-in for prompt and reply text: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`."""
    value = (environ if environ is not None else os.environ).get(CAPTURE_ENV, "")
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def split_model(model: str) -> tuple[str, str]:
    """`openai:gpt-4o` -> ("openai", "gpt-4o"); a name without a provider -> ("", name)."""
    provider, sep, name = model.partition(":")
    if not sep:
        return "", model
    return PROVIDER_NAMES.get(provider, provider), name


def model_attributes(model: str) -> dict[str, Any]:
    provider, name = split_model(model)
    attrs: dict[str, Any] = {REQUEST_MODEL: name}
    if provider:
        attrs[PROVIDER] = provider
    return attrs


def messages_json(messages: Iterable[tuple[str, str]]) -> str:
    """Messages as `gen_ai.input.messages` describes them (role plus text parts), as JSON."""
    items = [{"role": role, "parts": [{"type": "text", "content": text}]} for role, text in messages]
    return json.dumps(items, ensure_ascii=False)


def reply_json(text: str, finish_reason: str | None = None) -> str:
    item: dict[str, Any] = {"role": "assistant", "parts": [{"type": "text", "content": text}]}
    if finish_reason:
        item["finish_reason"] = finish_reason
    return json.dumps([item], ensure_ascii=False)


def clean(attrs: dict[str, Any]) -> dict[str, Any]:
    """Attributes without the None values (OpenTelemetry refuses them)."""
    return {k: v for k, v in attrs.items() if v is not None}
