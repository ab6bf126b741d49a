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
from dataclasses import dataclass, replace
from typing import Any

from rlmx.errors import InvalidSettings
from rlmx.lm.openai_compat import OpenAICompatLM
from rlmx.lm.options import ModelOptions
from rlmx.lm.registry import resolve_model
from rlmx.lm.retry import RetryPolicy
from rlmx.spec.base import ModelRef

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
OPENAI_CLIENT = ("openai", "vllm", "openrouter", "vercel", "portkey")  # the official's OpenAI-SDK clients
OWN = {
    "anthropic": ("max_tokens",),
    "azure_openai": ("azure_endpoint", "api_version", "azure_deployment"),
    **{name: ("default_headers",) for name in OPENAI_CLIENT},
}
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
    # an OpenAI-SDK backend's request-body additions, as the official sends `sampling_args` (None: the
    # backend's sampling goes through `options`)
    body: dict[str, Any] | None = None
    headers: dict[str, str] | None = None

    def engine_model(self) -> Any:
        """What rlmx's run is given: a model reference, or for an OpenAI-SDK backend the model object
        sending the official's body (`max_completion_tokens`, every sampling argument) and headers."""
        if self.body is None:
            return ModelRef(self.model, self.options)
        lm = resolve_model(self.model, self.options)
        if isinstance(lm, OpenAICompatLM):
            lm.max_tokens_param = "max_completion_tokens"
            lm.extra_body = {**lm.extra_body, **self.body}
            lm.default_headers = self.headers or lm.default_headers
        return lm


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
    if backend in OPENAI_CLIENT:
        return Backend(
            model,
            replace(options_of(kwargs, base_url, api_key, extra), retry=retry_of(kwargs)),
            str(name),
            body=official_body(sampling),
            headers=dict(kwargs["default_headers"]) if kwargs.get("default_headers") else None,
        )
    odd = sorted(set(sampling) - set(SAMPLING))
    if odd:
        raise InvalidSettings(
            f"sampling_args: {odd[0]!r} is not sent by rlmx.compat.rlms; it sends {', '.join(SAMPLING)}"
        )
    cap = sampling.get("max_completion_tokens", sampling.get("max_tokens"))
    options = replace(
        options_of(kwargs, base_url, api_key, extra),
        retry=retry_of(kwargs),
        temperature=sampling.get("temperature"),
        top_p=sampling.get("top_p"),
        reasoning_effort=sampling.get("reasoning_effort"),
    )
    return Backend(model, options, str(name), int(cap) if cap is not None else None)


def options_of(
    kwargs: dict[str, Any], base_url: str | None, api_key: str | None, extra: dict[str, str]
) -> ModelOptions:
    return ModelOptions(
        base_url=base_url,
        api_key=api_key,
        timeout_s=float(kwargs.get("timeout") or DEFAULT_TIMEOUT_S),
        extra=extra,
    )


def retry_of(kwargs: dict[str, Any]) -> RetryPolicy:
    """`max_retries` as rlmx's attempts (one more); rlmx's default policy otherwise."""
    retries = kwargs.get("max_retries")
    return RetryPolicy(max_attempts=int(retries) + 1) if retries is not None else RetryPolicy()


def official_body(sampling: dict[str, Any]) -> dict[str, Any]:
    """`sampling_args` as the official OpenAI client sends them: `max_tokens` renamed
    `max_completion_tokens`, `extra_body` merged in, None values left out."""
    args = dict(sampling)
    extra = args.pop("extra_body", None) or {}
    if "max_tokens" in args:
        args["max_completion_tokens"] = args.pop("max_tokens")
    return {**{k: v for k, v in args.items() if v is not None}, **extra}


__all__ = ["BACKENDS", "Backend", "backend_model"]
