"""The model seam: one async method taking messages and settings, returning text with usage."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rlmx.outcomes import Purpose

Message = dict[str, Any]  # {"role": "system"|"user"|"assistant", "content": str | [OpenAI content parts]}


RetryNotice = Callable[[int, str, float], None]  # (failed attempt, its error, seconds until the next)


@dataclass(frozen=True)
class CallSettings:
    """Per-call settings. `timeout_s` bounds one attempt; `deadline` (a `time.monotonic()` value) bounds
    the whole logical call, retries included: no attempt starts or runs past it. `on_retry` is told of
    each failed attempt that will be retried."""

    max_output_tokens: int | None = None
    timeout_s: float | None = None
    deadline: float | None = None
    on_retry: RetryNotice | None = field(default=None, compare=False)
    # what the call is for and where in the tree: set by the engine on every call; test doubles read it
    # (FunctionLM gets these settings; a loopback endpoint gets them as x-rlmx-* headers); never part of
    # a cache key, never sent to a remote provider
    purpose: Purpose | None = None
    depth: int | None = None
    iteration: int | None = None


@dataclass(frozen=True)
class Usage:
    """Token usage of one model call as the provider reported it."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None  # provider-reported cost, where the provider reports one
    cache_write_tokens: int = 0  # input tokens written to a prompt cache (Anthropic bills them higher)


@dataclass(frozen=True)
class LMResponse:
    """What a model call returns: the text and its usage, together."""

    text: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    attempts: int = 1
    attempt_errors: tuple[str, ...] = ()
    cached: bool = False  # answered from a response cache: no call, no cost
    finish_reason: str | None = None  # why the model stopped, as the provider says (stop, length, end_turn)


@runtime_checkable
class LM(Protocol):
    """A language model. `name` identifies it in usage accounting and traces."""

    name: str

    async def complete(self, messages: list[Message], settings: CallSettings) -> LMResponse: ...


class BaseLM:
    """An LM with its optional capabilities declared, each with a default. The built-in providers
    subclass it; a plain `LM` (any object with `name` and `complete`) is wrapped by `with_capabilities`,
    so the engine reads these attributes instead of probing for them."""

    name: str
    concurrency: int | None = None  # requests in flight it allows (sets a batch's width); None: unknown
    vision: bool | None = None  # sees images (None: as its model family is known, rlmx.images.vision)

    @property
    def cache_identity(self) -> str:
        """What makes two instances the same model for the response cache (default: the name)."""
        return self.name

    async def aclose(self) -> None:
        """Close connections opened in the running event loop (default: none to close)."""
        return None

    async def complete(self, messages: list[Message], settings: CallSettings) -> LMResponse:
        raise NotImplementedError


class PlainLM(BaseLM):
    """A caller's `LM` that declares no capabilities: the defaults, around its `complete`."""

    def __init__(self, inner: LM) -> None:
        self.inner = inner
        self.name = inner.name

    def __repr__(self) -> str:
        return f"PlainLM({self.inner!r})"

    async def complete(self, messages: list[Message], settings: CallSettings) -> LMResponse:
        return await self.inner.complete(messages, settings)


def with_capabilities(lm: LM) -> BaseLM:
    """`lm` itself when it declares its capabilities (a `BaseLM`), else `lm` wrapped with the defaults."""
    return lm if isinstance(lm, BaseLM) else PlainLM(lm)


# Context windows (tokens) of common models, used for history compaction and sub-call checks.
KNOWN_CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-5": 400_000,
    "gpt-4.1": 1_000_000,
    "gpt-4o": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude": 200_000,
    "gemini": 1_000_000,
    "qwen3-coder": 256_000,
    "llama-3": 128_000,
    "smollm2": 8_192,
}
DEFAULT_CONTEXT_WINDOW = 32_768


def context_window_for(model_name: str) -> int:
    """Best known context window for a model name; a conservative default otherwise."""
    name = model_name.lower().split(":")[-1].split("/")[-1]
    best = ""
    for prefix in KNOWN_CONTEXT_WINDOWS:
        if name.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return KNOWN_CONTEXT_WINDOWS[best] if best else DEFAULT_CONTEXT_WINDOW


def estimate_tokens(text_or_chars: str | int) -> int:
    """Fast token estimate (about 4 characters a token)."""
    n = text_or_chars if isinstance(text_or_chars, int) else len(text_or_chars)
    return (n + 3) // 4


def content_chars(content: Any) -> int:
    """Characters of a message's text: a str's, or a list of content parts' text parts (an image part's
    base64 is not text: its tokens are estimated apart, by `rlmx.images.parts.message_image_tokens`)."""
    if isinstance(content, list):
        return sum(
            len(str(p.get("text", ""))) for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return len(str(content))


def estimate_message_tokens(messages: list[Message]) -> int:
    return sum(estimate_tokens(content_chars(m.get("content", ""))) + 4 for m in messages)
