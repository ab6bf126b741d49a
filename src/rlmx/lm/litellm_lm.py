"""Any model LiteLLM reaches, as `litellm:MODEL` (extra `rlmx[litellm]`): AWS Bedrock
(`litellm:bedrock/...`), Google Vertex AI (`litellm:vertex_ai/...`) and the rest of LiteLLM's providers,
each with the credentials LiteLLM itself reads (AWS_*, GOOGLE_APPLICATION_CREDENTIALS, ...).

LiteLLM only carries one attempt: rlmx's retry loop (`call_with_retries`, with `classify_litellm_error`
for LiteLLM's exceptions), its per-model concurrency gate, rate limits, response cache and ledger apply
as for every provider, so LiteLLM's own retries are off (`num_retries=0`, `max_retries=0`; otherwise a
failed request is sent again behind rlmx's back). `--base-url` becomes LiteLLM's `api_base`.

LiteLLM is imported on first use (~3.5 s), with `LITELLM_LOCAL_MODEL_COST_MAP=True` set beforehand (or
the import downloads a price map from the internet), its debug banner off (it prints on stdout, where
rlmx prints answers) and its logger quiet below errors unless `LITELLM_LOG` says otherwise.

Prices: genai-prices first, by the route's catalog provider (`bedrock/` is aws, `vertex_ai/` is google,
...: the record's `price_routes`); a model the catalog lacks is priced from LiteLLM's own price map
(`litellm_cost`), which is what LiteLLM's `response_cost` is computed from.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import sys
from typing import Any

from rlmx.errors import ConfigError, TransientModelError
from rlmx.lm.base import BaseLM, CallSettings, LMResponse, Message, Usage, estimate_message_tokens
from rlmx.lm.guard import check_endpoint, is_loopback
from rlmx.lm.openai_compat import call_headers, transport_failure
from rlmx.lm.options import ModelOptions
from rlmx.lm.providers import ProviderRecord
from rlmx.lm.ratelimit import RateLimiter
from rlmx.lm.retry import Failure, PerLoop, RetryPolicy, call_with_retries, status_failure
from rlmx.lm.sampling import Sampling, check_accepted, refusal_classifier

LOCAL_COST_MAP_ENV = "LITELLM_LOCAL_MODEL_COST_MAP"
INSTALL_HINT = "the litellm provider needs LiteLLM: pip install 'rlmx[litellm]'"


def load_litellm() -> Any:
    """LiteLLM, set up for rlmx: imported once, with its bundled price map (no download at import), no
    debug banner on stdout, and its logger quiet below errors unless `LITELLM_LOG` is set."""
    module: Any = sys.modules.get("litellm")
    if module is None:
        os.environ.setdefault(LOCAL_COST_MAP_ENV, "True")
        try:
            module = importlib.import_module("litellm")
        except ModuleNotFoundError as exc:
            raise ConfigError(INSTALL_HINT) from exc
    module.suppress_debug_info = True
    if not os.environ.get("LITELLM_LOG"):
        logging.getLogger("LiteLLM").setLevel(logging.ERROR)
    return module


NO_KEY = "not-needed"


def _openai_route(model: str) -> bool:
    return model.startswith("openai/") or "/" not in model


def _openai_key() -> bool:
    return bool(os.environ.get("OPENAI_API_KEY"))


def litellm_model(model: str, options: ModelOptions, record: ProviderRecord | None = None) -> LiteLLMLM:
    """The registry's factory for `litellm:MODEL`: `MODEL` is any LiteLLM model string."""
    check_accepted(options.sampling(), record, model)
    return LiteLLMLM(model, api_base=options.base_url, api_key=options.api_key, **options.transport())


def classify_litellm_error(exc: Exception) -> Failure | None:
    """LiteLLM's exceptions as retry decisions. They carry the HTTP status LiteLLM mapped the provider's
    error to (a timeout is 408, a dropped connection or a reply that is not JSON 500), so the status
    decides, as for every provider; anything that is not LiteLLM's (or the openai SDK's, which LiteLLM
    subclasses) is not ours to judge."""
    if isinstance(exc, json.JSONDecodeError):
        return Failure(f"malformed reply (not JSON): {exc}", True)
    if not _from_litellm(exc):
        return None
    kind = type(exc).__name__
    causes = _causes(exc)
    missing = next((cause for cause in causes if isinstance(cause, ImportError)), None)
    if missing is not None:  # e.g. vertex_ai/ without google-auth: no attempt can succeed
        return Failure(f"LiteLLM needs a package this route uses: {missing}", False)
    if any(_raised_before_sending(cause) for cause in causes):  # e.g. no key: nothing was sent
        return Failure(f"{kind}: {str(exc)[:300]}", False)
    if kind in ("Timeout", "APITimeoutError"):
        return Failure(f"timeout: {str(exc)[:200]}", True, 408)
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool) and status >= 400:
        headers = getattr(exc, "litellm_response_headers", None) or _response_headers(exc)
        return status_failure(status, f"{kind}: {exc}", headers)
    return transport_failure(exc)  # a connection error without a status


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from or during."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 8:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _raised_before_sending(exc: BaseException) -> bool:
    """The openai SDK's own errors that are not about a request (a missing key, a bad setting)."""
    import openai

    return isinstance(exc, openai.OpenAIError) and not isinstance(exc, openai.APIError)


def _from_litellm(exc: Exception) -> bool:
    return any(cls.__module__.split(".", 1)[0] in ("litellm", "openai") for cls in type(exc).__mro__)


def _response_headers(exc: Exception) -> Any:
    try:
        response = getattr(exc, "response", None)
        return getattr(response, "headers", None)
    except Exception:  # LiteLLM builds some responses lazily; a missing one has no headers to give
        return None


def litellm_usage(raw: Any) -> Usage:
    """Usage from LiteLLM's `Usage` object, which it fills in the OpenAI convention for every provider
    (prompt_tokens include cache reads and writes; cache reads in prompt_tokens_details.cached_tokens,
    Anthropic-style cache writes in cache_creation_input_tokens)."""
    if raw is None:
        return Usage()
    details = getattr(raw, "prompt_tokens_details", None)
    out_details = getattr(raw, "completion_tokens_details", None)
    return Usage(
        input_tokens=_count(getattr(raw, "prompt_tokens", 0)),
        output_tokens=_count(getattr(raw, "completion_tokens", 0)),
        cached_tokens=_count(getattr(details, "cached_tokens", 0)),
        reasoning_tokens=_count(getattr(out_details, "reasoning_tokens", 0)),
        cache_write_tokens=_count(getattr(raw, "cache_creation_input_tokens", 0)),
    )


def _count(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def litellm_cost(model: str, usage: Usage) -> float | None:
    """USD for `usage` from LiteLLM's own price map (None when it has no price for `model`): the
    pricer's fallback for `litellm:` models genai-prices lacks (the record's `settings["cost"]`)."""
    try:
        litellm = load_litellm()
    except ConfigError:
        return None
    cached = min(usage.cached_tokens, usage.input_tokens)
    try:
        prompt_usd, completion_usd = litellm.cost_per_token(
            model=model,
            prompt_tokens=usage.input_tokens,
            completion_tokens=usage.output_tokens,
            cache_read_input_tokens=cached,
            cache_creation_input_tokens=min(usage.cache_write_tokens, usage.input_tokens - cached),
        )
    except Exception:  # LiteLLM raises a plain Exception for a model its map lacks
        return None
    return float(prompt_usd) + float(completion_usd)


class LiteLLMLM(BaseLM):
    """A model reached through `litellm.acompletion`, one attempt at a time under rlmx's retry loop."""

    concurrency: int

    def __init__(
        self,
        model: str,
        *,
        name: str | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        concurrency: int = 64,
        timeout_s: float = 600.0,
        retry: RetryPolicy | None = None,
        limiter: RateLimiter | None = None,
        sampling: Sampling | None = None,
    ) -> None:
        if concurrency < 1:
            raise ConfigError("concurrency must be >= 1")
        check_endpoint(api_base)  # None: the route's own provider, which is never on this machine
        self.litellm = load_litellm()
        self.model = model
        self.name = name or f"litellm:{model}"
        self.api_base = api_base
        # LiteLLM's OpenAI route will not send a request without a key, even to a local server
        self.api_key = api_key or (
            NO_KEY if api_base and _openai_route(model) and not _openai_key() else None
        )
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self.limiter = limiter
        self.sampling = sampling or Sampling()  # sent in every request (LiteLLM maps them per provider)
        self._sampling_body = self.sampling.body()
        self._loopback = is_loopback(api_base)
        self._gates: PerLoop[asyncio.Semaphore] = PerLoop(lambda: asyncio.Semaphore(self.concurrency))

    def __repr__(self) -> str:
        return f"LiteLLMLM({self.name!r}, api_base={self.api_base!r})"

    @property
    def where(self) -> str:
        return self.api_base or f"LiteLLM's endpoint for {self.model.split('/', 1)[0]}"

    @property
    def cache_identity(self) -> str:
        return f"{self.name}@{self.api_base or 'default'}"

    def request(self, messages: list[Message], settings: CallSettings) -> dict[str, Any]:
        """The keyword arguments of one `litellm.acompletion` call."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(message) for message in messages],  # LiteLLM may rewrite them in place
            "num_retries": 0,  # rlmx's loop is the only one: every attempt is one request
            "max_retries": 0,
            "timeout": settings.timeout_s or self.timeout_s,
            **self._sampling_body,
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        if settings.max_output_tokens:
            kwargs["max_tokens"] = settings.max_output_tokens
        if self._loopback:  # what the call is for, for a test server; never sent to a remote provider
            kwargs["extra_headers"] = call_headers(settings)
        return kwargs

    async def complete(self, messages: list[Message], settings: CallSettings) -> LMResponse:
        gate = self._gates.get()
        request = self.request(messages, settings)

        async def once(attempt: int) -> LMResponse:
            return self.response(await self.litellm.acompletion(**request))

        return await call_with_retries(
            f"{self.name} at {self.where}",
            once,
            refusal_classifier(classify_litellm_error, self._sampling_body),
            policy=self.retry,
            gate=gate,
            limiter=self.limiter,
            est_tokens=estimate_message_tokens(messages) + (settings.max_output_tokens or 0),
            deadline=settings.deadline,
            on_retry=settings.on_retry,
        )

    def response(self, reply: Any) -> LMResponse:
        """Text and usage of LiteLLM's `ModelResponse`; no choice or an empty text is transient."""
        choices = getattr(reply, "choices", None)
        if not choices:
            raise TransientModelError("malformed reply: no choices")
        message = getattr(choices[0], "message", None)
        text = getattr(message, "content", None)
        if not isinstance(text, str) or not text.strip():
            raise TransientModelError("empty reply")
        finish = getattr(choices[0], "finish_reason", None)
        return LMResponse(
            text=text,
            usage=litellm_usage(getattr(reply, "usage", None)),
            model=self.name,
            finish_reason=finish if isinstance(finish, str) else None,
        )
