"""Any OpenAI-compatible chat endpoint, on the official `openai` SDK, with bounded retries."""

from __future__ import annotations

import asyncio
import json
import os
import random
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import openai

from rlmx.errors import ConfigError, ModelError, RealProviderForbidden, TransientModelError
from rlmx.lm.base import CallSettings, LMResponse, Message, Usage

FORBID_ENV = "RLMX_FORBID_REAL_PROVIDERS"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def check_allowed(base_url: str | None) -> None:
    """Under the test-wide switch, only loopback endpoints may be called."""
    if os.environ.get(FORBID_ENV) != "1":
        return
    host = urlparse(base_url or "https://api.openai.com/v1").hostname or ""
    if host not in LOOPBACK and not host.startswith("127."):
        raise RealProviderForbidden(
            f"{FORBID_ENV}=1 forbids calls to real providers, but this model points at {host}"
        )


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay_s)
        return min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class OpenAICompatLM:
    """A model behind an OpenAI-compatible `/chat/completions` endpoint. One client per event loop."""

    def __init__(
        self,
        model: str,
        *,
        name: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        concurrency: int = 32,
        timeout_s: float = 600.0,
        retry: RetryPolicy | None = None,
        max_tokens_param: str = "max_tokens",
        extra_body: dict[str, Any] | None = None,
        default_headers: dict[str, str] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ConfigError("concurrency must be >= 1")
        check_allowed(base_url)
        self.model = model
        self.name = name or f"openai:{model}"
        self.base_url = base_url
        self.api_key = api_key or "not-needed"
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self.max_tokens_param = max_tokens_param
        self.extra_body = extra_body or {}
        self.default_headers = default_headers
        self._per_loop: dict[int, tuple[openai.AsyncOpenAI, asyncio.Semaphore]] = {}

    def __repr__(self) -> str:
        return f"OpenAICompatLM({self.name!r}, base_url={self.base_url!r})"

    def _client(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        loop_id = id(asyncio.get_running_loop())
        if loop_id not in self._per_loop:
            client = openai.AsyncOpenAI(
                api_key=self.api_key,
                base_url=self.base_url,
                max_retries=0,
                timeout=self.timeout_s,
                default_headers=self.default_headers,
            )
            self._per_loop = {loop_id: (client, asyncio.Semaphore(self.concurrency))}
        return self._per_loop[loop_id]

    async def complete(self, messages: list[Message], settings: CallSettings) -> LMResponse:
        client, semaphore = self._client()
        errors: list[str] = []
        for attempt in range(1, self.retry.max_attempts + 1):
            retry_after: float | None = None
            try:
                async with semaphore:
                    return await self._once(client, messages, settings, attempt, errors)
            except TransientModelError as exc:
                errors.append(str(exc))
                retry_after = exc.retry_after
            except (
                openai.RateLimitError,
                openai.InternalServerError,
                openai.APITimeoutError,
                openai.APIConnectionError,
                openai.APIResponseValidationError,
            ) as exc:
                errors.append(f"{type(exc).__name__}: {str(exc)[:300]}")
                retry_after = _retry_after(exc)
            except openai.APIStatusError as exc:
                if exc.status_code in (408, 409) or exc.status_code >= 500:
                    errors.append(f"{type(exc).__name__}: {str(exc)[:300]}")
                    retry_after = _retry_after(exc)
                else:
                    raise ModelError(
                        f"{self.name}: HTTP {exc.status_code}: {str(exc)[:500]}",
                        attempts=attempt,
                        status=exc.status_code,
                    ) from exc
            if attempt < self.retry.max_attempts:
                await asyncio.sleep(self.retry.delay(attempt, retry_after))
        raise ModelError(
            f"{self.name}: failed after {self.retry.max_attempts} attempts; last error: {errors[-1]}",
            attempts=self.retry.max_attempts,
        )

    async def _once(
        self,
        client: openai.AsyncOpenAI,
        messages: list[Message],
        settings: CallSettings,
        attempt: int,
        errors: list[str],
    ) -> LMResponse:
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages}
        if settings.max_output_tokens:
            kwargs[self.max_tokens_param] = settings.max_output_tokens
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        if settings.timeout_s:
            kwargs["timeout"] = settings.timeout_s
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        try:
            completion = await client.chat.completions.create(**kwargs)
        except json.JSONDecodeError as exc:
            raise TransientModelError(f"malformed reply (not JSON): {exc}") from exc
        if isinstance(completion, (str, bytes)) or not getattr(completion, "choices", None):
            raise TransientModelError("malformed reply: no choices")
        text = completion.choices[0].message.content
        if not isinstance(text, str) or not text.strip():
            raise TransientModelError("empty reply")
        return LMResponse(
            text=text,
            usage=usage_of(completion.usage),
            model=self.name,
            attempts=attempt,
            attempt_errors=tuple(errors),
        )


def usage_of(raw: Any) -> Usage:
    if raw is None:
        return Usage()
    details = getattr(raw, "prompt_tokens_details", None)
    out_details = getattr(raw, "completion_tokens_details", None)
    extra = getattr(raw, "model_extra", None) or {}
    cost = extra.get("cost")
    return Usage(
        input_tokens=int(getattr(raw, "prompt_tokens", 0) or 0),
        output_tokens=int(getattr(raw, "completion_tokens", 0) or 0),
        cached_tokens=int(getattr(details, "cached_tokens", 0) or 0) if details else 0,
        reasoning_tokens=int(getattr(out_details, "reasoning_tokens", 0) or 0) if out_details else 0,
        cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
    )
