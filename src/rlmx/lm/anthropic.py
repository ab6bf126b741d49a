"""Anthropic's Messages API on the official `anthropic` SDK (extra `rlmx[anthropic]`).

Prompt caching: the system prompt carries a cache breakpoint, and in a multi-turn conversation (an
RLM's root history) so does the newest message, so each turn reads the previous turn's prefix from
the cache instead of paying for it again. Single-message sub-calls carry no breakpoint (a cache write
costs more than a plain input token and would rarely be read back).

Sampling: `temperature` (0 to 1 here) and `top_p` are sent under those names; `reasoning_effort` is
sent as the Messages API's own effort setting, `output_config.effort` (low, medium, high, xhigh, max;
"none" and "minimal" have no counterpart there and are refused when the model is built). Extended
thinking (a token budget) is not used. All three go in the request body through the SDK's `extra_body`:
recent SDKs no longer take `temperature` and `top_p` as arguments, while the API still reads them on
the models that support them. Which models take which setting is the API's call: a refusal comes back
as an HTTP 400, reported as the setting refused.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from typing import Any

from rlmx.errors import ConfigError, ModelError, TransientModelError
from rlmx.images.parts import content_text, decoded
from rlmx.lm.base import BaseLM, CallSettings, LMResponse, Message, Usage, estimate_message_tokens
from rlmx.lm.guard import check_endpoint, is_loopback
from rlmx.lm.openai_compat import call_headers
from rlmx.lm.options import ModelOptions
from rlmx.lm.providers import ProviderRecord, built_in
from rlmx.lm.ratelimit import RateLimiter
from rlmx.lm.retry import Failure, PerLoop, RetryPolicy, call_with_retries, status_failure
from rlmx.lm.sampling import Sampling, check_accepted, refusal_classifier

try:
    import anthropic
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the install
    raise ConfigError(
        "the anthropic provider needs the anthropic SDK: pip install 'rlmx[anthropic]'"
    ) from exc

RECORD = built_in("anthropic")  # its key variable, base URL variable and default endpoint
KEY_ENV, BASE_ENV, DEFAULT_BASE = str(RECORD.key_env), str(RECORD.base_env), str(RECORD.base_url)
EFFORTS = ("low", "medium", "high", "xhigh", "max")  # what output_config.effort takes
DEFAULT_MAX_TOKENS = 4096  # the API requires max_tokens; --max-output-tokens overrides it
EPHEMERAL = {"type": "ephemeral"}


def anthropic_model(model: str, options: ModelOptions, record: ProviderRecord | None = None) -> AnthropicLM:
    """The registry's factory for `anthropic:MODEL`."""
    base_url = options.base_url or os.environ.get(BASE_ENV)
    api_key = options.api_key or os.environ.get(KEY_ENV)
    if not api_key and not base_url:
        raise ConfigError(
            f"no API key for anthropic:{model}: set {KEY_ENV} (e.g. export {KEY_ENV}=sk-ant-...) "
            "or put api_key under [providers.anthropic] in rlmx.toml"
        )
    max_tokens = options.extra.get("max_tokens")
    check_accepted(options.sampling(), record, model)
    return AnthropicLM(
        model,
        base_url=base_url,
        api_key=api_key,
        **options.transport(),
        default_max_tokens=int(max_tokens) if max_tokens else DEFAULT_MAX_TOKENS,
        prompt_caching=options.extra.get("prompt_caching", "true").lower() not in ("0", "false", "no"),
    )


def anthropic_sampling(sampling: dict[str, Any]) -> dict[str, Any]:
    """rlmx's sampling settings as Messages API body fields: reasoning_effort is `output_config.effort`."""
    body = {key: value for key, value in sampling.items() if key != "reasoning_effort"}
    if "reasoning_effort" in sampling:
        body["output_config"] = {"effort": sampling["reasoning_effort"]}
    return body


def classify_anthropic_error(exc: Exception) -> Failure | None:
    if isinstance(exc, json.JSONDecodeError):
        return Failure(f"malformed reply (not JSON): {exc}", True)
    if isinstance(exc, anthropic.APITimeoutError):
        return Failure(f"timeout: {str(exc)[:200]}", True)
    if isinstance(exc, anthropic.APIConnectionError):
        return Failure(f"connection error: {str(exc)[:200]}", True)
    if isinstance(exc, anthropic.APIResponseValidationError):
        return Failure(f"malformed reply: {str(exc)[:300]}", True)
    if isinstance(exc, anthropic.APIStatusError):
        return status_failure(exc.status_code, f"{type(exc).__name__}: {exc}", exc.response.headers)
    return None


def to_anthropic(messages: list[Message], *, prompt_caching: bool) -> tuple[list[dict[str, Any]], list[Any]]:
    """OpenAI-style messages -> (system blocks, alternating user/assistant messages), with breakpoints.
    An OpenAI `image_url` part with a base64 data URL becomes an Anthropic `image` block."""
    system_text = "\n\n".join(
        content_text(m.get("content", "")) for m in messages if m.get("role") == "system"
    )
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            continue
        role = "assistant" if role == "assistant" else "user"
        blocks = _blocks(message.get("content", ""))
        if turns and turns[-1]["role"] == role:
            _merge(turns[-1]["content"], blocks)
        else:
            turns.append({"role": role, "content": blocks})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": "(continue)"}]})
    system: list[dict[str, Any]] = []
    if system_text:
        system.append({"type": "text", "text": system_text})
        if prompt_caching:
            system[0]["cache_control"] = EPHEMERAL
    if prompt_caching and len(turns) > 1:
        turns[-1]["content"][-1]["cache_control"] = EPHEMERAL
    return system, turns


def _blocks(content: Any) -> list[dict[str, Any]]:
    """A message's content as Anthropic blocks: text (never empty: the API rejects that) and images."""
    if not isinstance(content, list):
        return [{"type": "text", "text": str(content) or "(empty)"}]
    blocks: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "image_url":
            found = decoded(str((part.get("image_url") or {}).get("url", "")))
            if found is None:
                raise ModelError("an image for Anthropic must be a base64 data URL")
            data = base64.b64encode(found[1]).decode("ascii")
            blocks.append(
                {"type": "image", "source": {"type": "base64", "media_type": found[0], "data": data}}
            )
        else:
            _merge(blocks, [{"type": "text", "text": content_text([part]) or "(empty)"}])
    return blocks or [{"type": "text", "text": "(empty)"}]


def _merge(into: list[dict[str, Any]], blocks: list[dict[str, Any]]) -> None:
    """Append `blocks`, a text block joining the text block before it (as one turn's text)."""
    for block in blocks:
        if block["type"] == "text" and into and into[-1]["type"] == "text":
            into[-1] = {"type": "text", "text": into[-1]["text"] + "\n\n" + block["text"]}
        else:
            into.append(dict(block))


def anthropic_usage(raw: Any) -> Usage:
    """Anthropic counts cached and cache-written input apart; rlmx's input_tokens includes both."""
    if raw is None:
        return Usage()
    fresh = int(getattr(raw, "input_tokens", 0) or 0)
    read = int(getattr(raw, "cache_read_input_tokens", 0) or 0)
    written = int(getattr(raw, "cache_creation_input_tokens", 0) or 0)
    return Usage(
        input_tokens=fresh + read + written,
        output_tokens=int(getattr(raw, "output_tokens", 0) or 0),
        cached_tokens=read,
        cache_write_tokens=written,
    )


class AnthropicLM(BaseLM):
    """A Claude model through the Messages API. One SDK client per event loop; bounded retries."""

    concurrency: int  # always known here: requests in flight per event loop

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        concurrency: int = 32,
        timeout_s: float = 600.0,
        retry: RetryPolicy | None = None,
        limiter: RateLimiter | None = None,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        prompt_caching: bool = True,
        sampling: Sampling | None = None,
    ) -> None:
        if concurrency < 1:
            raise ConfigError("concurrency must be >= 1")
        sampling = sampling or Sampling()
        if sampling.reasoning_effort is not None and sampling.reasoning_effort not in EFFORTS:
            raise ConfigError(
                f"anthropic:{model}: reasoning_effort {sampling.reasoning_effort!r} has no counterpart in "
                f"Anthropic's effort setting, which takes {', '.join(EFFORTS)}"
            )
        if sampling.temperature is not None and sampling.temperature > 1:
            raise ConfigError(
                f"anthropic:{model}: Anthropic takes a temperature from 0 to 1, got {sampling.temperature:g}"
            )
        check_endpoint(base_url or DEFAULT_BASE)
        self.model = model
        self.name = f"anthropic:{model}"
        self.base_url = base_url
        self.api_key = api_key or "not-needed"
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self.limiter = limiter
        self.default_max_tokens = default_max_tokens
        self.prompt_caching = prompt_caching
        self.sampling = sampling
        self._per_loop = PerLoop(
            lambda: (self._new_client(), asyncio.Semaphore(self.concurrency)), _close_client
        )

    def __repr__(self) -> str:
        return f"AnthropicLM({self.name!r}, base_url={self.base_url!r})"

    @property
    def cache_identity(self) -> str:
        return f"{self.name}@{self.base_url or DEFAULT_BASE}"

    def _new_client(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key=self.api_key, base_url=self.base_url, max_retries=0, timeout=self.timeout_s
        )

    async def aclose(self) -> None:
        """Close this event loop's client now (a loop ended by `asyncio.run` closes it itself)."""
        await self._per_loop.aclose()

    async def complete(self, messages: list[Message], settings: CallSettings) -> LMResponse:
        client, semaphore = await self._per_loop.aget()
        system, turns = to_anthropic(messages, prompt_caching=self.prompt_caching)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": turns,
            "max_tokens": settings.max_output_tokens or self.default_max_tokens,
        }
        if system:
            kwargs["system"] = system
        sampling = self.sampling.body()
        if sampling:
            kwargs["extra_body"] = anthropic_sampling(sampling)
        if settings.timeout_s:
            kwargs["timeout"] = settings.timeout_s
        if is_loopback(self.base_url or DEFAULT_BASE):
            kwargs["extra_headers"] = call_headers(settings)

        async def once(attempt: int) -> LMResponse:
            reply = await client.messages.create(**kwargs)
            blocks = getattr(reply, "content", None)
            if not isinstance(blocks, list) or not blocks:
                raise TransientModelError("malformed reply: no content blocks")
            text = "".join(b.text for b in blocks if getattr(b, "type", "") == "text")
            if not text.strip():
                raise TransientModelError("empty reply")
            stop = getattr(reply, "stop_reason", None)
            return LMResponse(
                text=text,
                usage=anthropic_usage(reply.usage),
                model=self.name,
                finish_reason=stop if isinstance(stop, str) else None,
            )

        return await call_with_retries(
            f"{self.name} at {self.base_url or DEFAULT_BASE}",
            once,
            refusal_classifier(classify_anthropic_error, sampling),
            policy=self.retry,
            gate=semaphore,
            limiter=self.limiter,
            est_tokens=estimate_message_tokens(messages) + kwargs["max_tokens"],
            deadline=settings.deadline,
            on_retry=settings.on_retry,
        )


async def _close_client(pair: tuple[anthropic.AsyncAnthropic, asyncio.Semaphore]) -> None:
    await pair[0].close()
