"""Any OpenAI-compatible chat endpoint, on the official `openai` SDK, with bounded retries."""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import os
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import openai

from rlmx.errors import ConfigError, TransientModelError
from rlmx.lm.base import BaseLM, CallSettings, LMResponse, Message, Usage, estimate_message_tokens
from rlmx.lm.endpoint_hints import refused_fast, v1_hint, with_hint
from rlmx.lm.guard import FORBID_ENV, check_endpoint, is_loopback
from rlmx.lm.ratelimit import RateLimiter
from rlmx.lm.retry import Failure, PerLoop, RetryPolicy, call_with_retries, status_failure
from rlmx.lm.sampling import Sampling, refusal_classifier

__all__ = [
    "FORBID_ENV",
    "OpenAICompatLM",
    "RetryPolicy",
    "call_headers",
    "check_endpoint",
    "is_loopback",
    "reply_text",
    "usage_of",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def call_headers(settings: CallSettings) -> dict[str, str]:
    """What a call is for, as headers for a loopback test server (`x-rlmx-purpose`, `-depth`,
    `-iteration`). Only ever sent to loopback endpoints: a remote provider never sees them."""
    headers: dict[str, str] = {}
    if settings.purpose is not None:
        headers["x-rlmx-purpose"] = settings.purpose
    if settings.depth is not None:
        headers["x-rlmx-depth"] = str(settings.depth)
    if settings.iteration is not None:
        headers["x-rlmx-iteration"] = str(settings.iteration)
    return headers


def classify_openai_error(exc: Exception) -> Failure | None:
    """The openai SDK's exceptions as retry decisions; anything else is not ours to judge."""
    if isinstance(exc, json.JSONDecodeError):
        return Failure(f"malformed reply (not JSON): {exc}", True)
    if isinstance(exc, openai.APIConnectionError):  # APITimeoutError included
        return transport_failure(exc)
    if isinstance(exc, openai.APIResponseValidationError):
        return Failure(f"malformed reply: {str(exc)[:300]}", True)
    if isinstance(exc, openai.APIStatusError):
        message = f"{type(exc).__name__}: {exc}{unread_error_text(exc.body, str(exc))}"
        message += getattr(exc, "rlmx_hint", "")  # e.g. a 404's "did you mean .../v1?"
        return status_failure(exc.status_code, message, exc.response.headers)
    return None


def unread_error_text(body: Any, said: str) -> str:
    """The provider's own words from an error body the SDK's message leaves out: Gemini's errors are a
    JSON array of `{"error": {...}}` objects, which the SDK reports as a bare "Error code: 400"."""
    if not isinstance(body, list):
        return ""
    errors = [item.get("error") for item in body if isinstance(item, dict)]
    texts = [e["message"] for e in errors if isinstance(e, dict) and isinstance(e.get("message"), str)]
    text = "; ".join(t for t in texts if t not in said)
    return f" - {text}" if text else ""


def transport_failure(exc: Exception) -> Failure:
    """A failure below HTTP, named after its first cause (`RemoteProtocolError: Server disconnected`
    says more than the SDK's "Connection error."; some transports report a dropped connection as a
    timeout, which the cause corrects)."""
    root: BaseException = exc
    for _ in range(8):
        if root.__cause__ is None:
            break
        root = root.__cause__
    timed_out = isinstance(root, TimeoutError) or "Timeout" in type(root).__name__
    detail = str(exc) if root is exc else f"{type(root).__name__}: {root}"
    return Failure(f"{'timeout' if timed_out else 'connection error'}: {detail[:200]}", True)


ClientFactory = Callable[["OpenAICompatLM"], openai.AsyncOpenAI]
UsageReader = Callable[[Any], Usage]  # a reply's `usage` object (parsed JSON) -> Usage


class OpenAICompatLM(BaseLM):
    """A model behind an OpenAI-compatible `/chat/completions` endpoint. One client per event loop.

    `sampling` (temperature, top_p, reasoning_effort) goes into every request body under those names."""

    concurrency: int  # always known here: requests in flight per event loop

    def __init__(
        self,
        model: str,
        *,
        name: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        concurrency: int = 64,
        timeout_s: float = 600.0,
        retry: RetryPolicy | None = None,
        max_tokens_param: str = "max_tokens",
        extra_body: dict[str, Any] | None = None,
        default_headers: dict[str, str] | None = None,
        limiter: RateLimiter | None = None,
        client_factory: ClientFactory | None = None,
        sampling: Sampling | None = None,
        usage_reader: UsageReader | None = None,
    ) -> None:
        if concurrency < 1:
            raise ConfigError("concurrency must be >= 1")
        check_endpoint(base_url or DEFAULT_BASE_URL)
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
        self.limiter = limiter
        self.sampling = sampling or Sampling()
        self._sampling_body = self.sampling.body()
        self._client_factory = client_factory or _default_client
        self.usage_reader = usage_reader or usage_of  # a provider that reports usage its own way reads it
        self._loopback = is_loopback(base_url)
        self._answered = False  # a call has succeeded: a refused connection is an outage, not a typo
        self._v1_hint: str | None = None  # after a 404: the `/v1` hint, probed once
        if client_factory is None:
            tls_context_for(base_url)  # built here, once per process, rather than inside the first run
            warm_http_backend()
            sdk_platform()
        self._per_loop = PerLoop(lambda: ClientShards(self, self.concurrency), ClientShards.aclose)

    def __repr__(self) -> str:
        return f"OpenAICompatLM({self.name!r}, base_url={self.base_url!r})"

    @property
    def cache_identity(self) -> str:
        """What makes two instances the same model for the response cache."""
        return f"{self.name}@{self.base_url or 'default'}"

    async def aclose(self) -> None:
        """Close this event loop's clients and their connections now. Optional: a loop that ends through
        `asyncio.run` closes them itself."""
        await self._per_loop.aclose()

    async def complete(self, messages: list[Message], settings: CallSettings) -> LMResponse:
        shards = await self._per_loop.aget()
        est = estimate_message_tokens(messages) + (settings.max_output_tokens or 0)
        sampling = self._sampling_body

        async def once(attempt: int) -> LMResponse:
            index = shards.take()
            try:
                return await self._once(shards.clients[index], messages, settings, sampling)
            finally:
                shards.give_back(index)

        url = self.base_url or DEFAULT_BASE_URL
        classify = refusal_classifier(classify_openai_error, sampling)
        if self._loopback and not self._answered:
            classify = refused_fast(classify, url)
        response = await call_with_retries(
            f"{self.name} at {url}",
            once,
            classify,
            policy=self.retry,
            gate=shards.semaphore,
            limiter=self.limiter,
            est_tokens=est,
            deadline=settings.deadline,
            on_retry=settings.on_retry,
        )
        self._answered = True
        return response

    async def _once(
        self,
        client: openai.AsyncOpenAI,
        messages: list[Message],
        settings: CallSettings,
        sampling: dict[str, Any],
    ) -> LMResponse:
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if settings.max_output_tokens:
            body[self.max_tokens_param] = settings.max_output_tokens
        if sampling:
            body.update(sampling)
        body.update(self.extra_body)
        options: dict[str, Any] = {"timeout": settings.timeout_s} if settings.timeout_s else {}
        if self._loopback:
            options["headers"] = call_headers(settings)
        # `client.post` rather than `chat.completions.create`: the latter walks every message through
        # the SDK's TypedDict transform, ~0.15 ms a message on each call (7 ms a turn at 40 messages);
        # our messages are plain JSON already. Same endpoint, auth, headers, retries and errors. The
        # reply is read as plain JSON (`cast_to=object`) too: building the SDK's `ChatCompletion` model
        # cost ~0.3 ms a reply, a fifth of the client's CPU per sub-call in a fan-out.
        try:
            reply = await client.post(  # type: ignore[call-overload]  # options: the SDK's RequestOptions
                "/chat/completions", cast_to=object, body=body, options=options
            )
        except openai.NotFoundError as exc:
            if self._v1_hint is None:
                self._v1_hint = await v1_hint(client, self.base_url)
            with_hint(exc, self._v1_hint)
            raise
        text = reply_text(reply)  # a reply that is not a JSON object stops here
        finish = reply["choices"][0].get("finish_reason")
        return LMResponse(
            text=text,
            usage=self.usage_reader(reply.get("usage")),
            model=self.name,
            finish_reason=finish if isinstance(finish, str) else None,
        )


CONNECTIONS_PER_CLIENT = 16


class ClientShards:
    """One event loop's SDK clients for one model, and the semaphore that bounds its calls there.

    The HTTP library's connection pool looks over every connection it holds on each request and each
    reply, so its cost per request grows with the connections in the pool: at 64 in flight it was ~0.17
    ms (a tenth) of the client's CPU per request. Calls are spread over clients of at most
    `CONNECTIONS_PER_CLIENT` calls each, made as they are needed; each call goes to the least busy one
    (the first on a tie, so calls one at a time keep reusing one warm connection)."""

    def __init__(self, lm: OpenAICompatLM, concurrency: int) -> None:
        self._lm = lm
        self._limit = -(-concurrency // CONNECTIONS_PER_CLIENT)
        self.clients: list[openai.AsyncOpenAI] = [lm._client_factory(lm)]
        self.busy = [0]
        self.semaphore = asyncio.Semaphore(concurrency)

    def take(self) -> int:
        """The index of the client for the next call, counted busy until the caller gives it back."""
        index = min(range(len(self.busy)), key=self.busy.__getitem__)
        if self.busy[index] >= CONNECTIONS_PER_CLIENT and len(self.clients) < self._limit:
            self.clients.append(self._lm._client_factory(self._lm))
            self.busy.append(0)
            index = len(self.clients) - 1
        self.busy[index] += 1
        return index

    def give_back(self, index: int) -> None:
        """The call that took client `index` is over."""
        self.busy[index] -= 1

    async def aclose(self) -> None:
        for client in self.clients:
            await client.close()


def reply_text(reply: Any) -> str:
    """The text of a `/chat/completions` reply (parsed JSON); a malformed or empty one is transient."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise TransientModelError("malformed reply: no choices")
    message = choices[0].get("message")
    text = message.get("content") if isinstance(message, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise TransientModelError("empty reply")
    return text


def _default_client(lm: OpenAICompatLM) -> openai.AsyncOpenAI:
    client = openai.AsyncOpenAI(
        api_key=lm.api_key,
        base_url=lm.base_url,
        max_retries=0,
        timeout=lm.timeout_s,
        default_headers=lm.default_headers,
        http_client=http_client(lm.base_url),
    )
    return with_known_platform(client)


def with_known_platform(client: openai.AsyncOpenAI) -> openai.AsyncOpenAI:
    """The SDK works out the OS it names in its `X-Stainless-OS` header on each client's first request,
    in a worker thread: ~4 ms and a thread hop in a run's first model call, and again for each client a
    wide batch adds. It is the same for every client of the process, so it is worked out once
    (`sdk_platform`) and given to each client; an SDK without the attribute is left to do it itself."""
    if getattr(client, "_platform", False) is None:
        client._platform = sdk_platform()
    return client


@functools.cache
def sdk_platform() -> Any:
    from openai._base_client import get_platform

    return get_platform()


def http_client(base_url: str | None = None) -> Any:
    """The SDK's default async HTTP client, with the TLS context for `base_url` (`tls_context_for`)."""
    return openai.DefaultAsyncHttpxClient(verify=tls_context_for(base_url))


def tls_context_for(base_url: str | None) -> ssl.SSLContext:
    """The process's one TLS context; for a plain-http endpoint reached without a proxy (a local
    server), one that trusts no certificate at all, since no TLS is expected there: loading the CA
    store costs ~55 ms a process. Should a redirect lead such a client to https anyway, certificate
    verification fails loudly instead of passing unchecked."""
    plain = base_url is not None and urlparse(base_url).scheme == "http"
    if plain and not any(os.environ.get(name) for name in PROXY_ENVS):
        return no_tls_expected_context()
    return shared_ssl_context()


PROXY_ENVS = ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


@functools.cache
def no_tls_expected_context() -> ssl.SSLContext:
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies certificates and hostnames, trusts none


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """The HTTP library's default TLS context, built once per process: building one loads the CA store
    (~55 ms), and a client is made per event loop, so per `RLM.run()`."""
    try:
        import httpx2 as http_library  # what openai>=3 runs on
    except ImportError:
        import httpx as http_library  # type: ignore[no-redef]
    return http_library.create_ssl_context()


@functools.cache
def warm_http_backend() -> None:
    """Import the async network backend the HTTP library loads on its first connection (~15 ms), here
    rather than between a run's start and its first model request."""
    for module in ("httpcore2._backends.anyio", "anyio._backends._asyncio"):
        try:
            importlib.import_module(module)
        except ImportError:  # another HTTP stack: it pays its first-use imports on its first request
            continue


def usage_of(raw: Any) -> Usage:
    """Usage from a reply's `usage` object (parsed JSON); fields a server leaves out count as 0."""
    if not isinstance(raw, dict):
        return Usage()
    details = raw.get("prompt_tokens_details")
    out_details = raw.get("completion_tokens_details")
    cost = raw.get("cost")  # OpenRouter reports what the call cost
    return Usage(
        input_tokens=_count(raw.get("prompt_tokens")),
        output_tokens=_count(raw.get("completion_tokens")),
        cached_tokens=_count(details.get("cached_tokens")) if isinstance(details, dict) else 0,
        reasoning_tokens=_count(out_details.get("reasoning_tokens")) if isinstance(out_details, dict) else 0,
        cost_usd=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None,
    )


def _count(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
