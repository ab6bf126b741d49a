"""The official backends as rlmx models: `backend` + `backend_kwargs` -> a model string and
`ModelOptions` (`rlm.clients` in the official package builds SDK clients; rlmx builds its own).

| backend | rlmx model | endpoint |
|---|---|---|
| openai | `openai:MODEL` | `base_url` or OpenAI's |
| vllm | `vllm:MODEL` | `base_url` (required, as officially) |
| openrouter | `openrouter:MODEL` | https://openrouter.ai/api/v1 |
| vercel | `openai:MODEL` | https://ai-gateway.vercel.sh/v1 (key: AI_GATEWAY_API_KEY) |
| portkey | `openai:MODEL` | https://api.portkey.ai/v1 (key: `api_key`, or PORTKEY_API_KEY) |
| anthropic | `anthropic:MODEL` | Anthropic's (`max_tokens` kept) |
| azure_openai | `azure:DEPLOYMENT` | `azure_endpoint` (or AZURE_OPENAI_ENDPOINT), `api_version` |
| gemini | `gemini:MODEL` | Gemini's OpenAI-compatible endpoint |
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from rlmx.errors import InvalidSettings
from rlmx.lm.options import ModelOptions
from rlmx.lm.retry import RetryPolicy

BACKENDS = ("openai", "portkey", "openrouter", "vercel", "vllm", "anthropic", "azure_openai", "gemini")
PROVIDER = {
    "openai": "openai",
    "vllm": "vllm",
    "openrouter": "openrouter",
    "vercel": "openai",
    "portkey": "openai",
    "anthropic": "anthropic",
    "azure_openai": "azure",
    "gemini": "gemini",
}
BASE_URL = {"vercel": "https://ai-gateway.vercel.sh/v1", "portkey": "https://api.portkey.ai/v1"}
KEY_ENV = {"vercel": "AI_GATEWAY_API_KEY", "portkey": "PORTKEY_API_KEY"}
COMMON = ("model_name", "api_key", "base_url", "timeout", "sampling_args", "max_retries")
OWN = {"anthropic": ("max_tokens",), "azure_openai": ("azure_endpoint", "api_version", "azure_deployment")}
SAMPLING = ("temperature", "top_p", "reasoning_effort", "max_tokens", "max_completion_tokens")
DEFAULT_TIMEOUT_S = 300.0  # the official clients' default


@dataclass(frozen=True)
class Backend:
    """One backend as rlmx reaches it: the model string, its options, the name the official reports
    (`model_name`) and the per-call output cap its sampling asks for."""

    model: str
    options: ModelOptions
    model_name: str
    max_output_tokens: int | None = None


def backend_model(backend: str, kwargs: dict[str, Any] | None, *, role: str = "backend") -> Backend:
    """`backend` with `kwargs` as an rlmx model; an unknown backend or key is refused by name."""
    if backend not in BACKENDS:
        raise InvalidSettings(f"Unknown backend: {backend}. Supported backends: {list(BACKENDS)}")
    kwargs = dict(kwargs or {})
    known = COMMON + OWN.get(backend, ())
    unknown = sorted(set(kwargs) - set(known))
    if unknown:
        raise InvalidSettings(
            f"{role}_kwargs: {unknown[0]!r} is not a setting rlmx.compat.rlms passes on for backend "
            f"{backend!r} (rlmx builds its own clients); known: {', '.join(known)}"
        )
    name = kwargs.get("model_name") or ("gemini-2.5-flash" if backend == "gemini" else None)
    if not name:
        raise InvalidSettings(f"{role}_kwargs needs 'model_name' (the model to call)")
    base_url = kwargs.get("base_url") or BASE_URL.get(backend)
    if backend == "vllm" and not kwargs.get("base_url"):
        raise InvalidSettings(f"{role}_kwargs needs 'base_url' for vllm: the address of your vLLM server")
    api_key = kwargs.get("api_key") or (os.environ.get(KEY_ENV[backend]) if backend in KEY_ENV else None)
    extra: dict[str, str] = {}
    model = f"{PROVIDER[backend]}:{name}"
    if backend == "anthropic" and kwargs.get("max_tokens") is not None:
        extra["max_tokens"] = str(int(kwargs["max_tokens"]))
    if backend == "azure_openai":
        base_url = kwargs.get("azure_endpoint") or base_url
        if kwargs.get("api_version"):
            extra["api_version"] = str(kwargs["api_version"])
        model = f"azure:{kwargs.get('azure_deployment') or os.environ.get('AZURE_OPENAI_DEPLOYMENT') or name}"
    sampling = dict(kwargs.get("sampling_args") or {})
    odd = sorted(set(sampling) - set(SAMPLING))
    if odd:
        raise InvalidSettings(
            f"sampling_args: {odd[0]!r} is not sent by rlmx.compat.rlms; it sends {', '.join(SAMPLING)}"
        )
    cap = sampling.get("max_completion_tokens", sampling.get("max_tokens"))
    options = ModelOptions(
        base_url=base_url,
        api_key=api_key,
        timeout_s=float(kwargs.get("timeout") or DEFAULT_TIMEOUT_S),
        extra=extra,
        retry=RetryPolicy(max_attempts=int(kwargs["max_retries"]) + 1)
        if kwargs.get("max_retries") is not None
        else RetryPolicy(),
        temperature=sampling.get("temperature"),
        top_p=sampling.get("top_p"),
        reasoning_effort=sampling.get("reasoning_effort"),
    )
    return Backend(model, options, str(name), int(cap) if cap is not None else None)


__all__ = ["BACKENDS", "Backend", "backend_model"]
