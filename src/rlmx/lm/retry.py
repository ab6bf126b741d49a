"""Bounded retries shared by every provider: backoff with jitter, Retry-After, a per-model gate.

A provider supplies one attempt (`once`) and a classifier that turns its SDK's exceptions into a
`Failure` (transient or not). `call_with_retries` does the rest and returns the response with the
number of attempts and the error of every failed attempt, or raises `ModelError` carrying both.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from rlmx.errors import DeadlineExceeded, InvalidSettings, ModelError, TransientModelError
from rlmx.lm.base import LMResponse, RetryNotice
from rlmx.lm.ratelimit import RateLimiter

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """At most `max_attempts` attempts per logical call; exponential backoff with jitter in between.

    The wait before attempt n+1 is `base_delay_s * 2**(n-1)` scaled by a random factor in [0.5, 1],
    capped at `max_delay_s`; a server's Retry-After replaces it (capped the same way).
    """

    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise InvalidSettings("RetryPolicy: max_attempts must be >= 1")
        if self.base_delay_s < 0 or self.max_delay_s < 0:
            raise InvalidSettings("RetryPolicy: delays must be >= 0")

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay_s)
        return min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)


@dataclass(frozen=True)
class Failure:
    """One failed attempt, as a provider's classifier sees it."""

    message: str
    transient: bool
    status: int | None = None
    retry_after: float | None = None


Classifier = Callable[[Exception], "Failure | None"]  # None: not a provider error, let it propagate


def retry_after_of(headers: Any) -> float | None:
    """Seconds to wait from `retry-after-ms` / `Retry-After` (seconds or an HTTP date), if present."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass  # malformed: fall through to Retry-After
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass  # not seconds: maybe an HTTP date
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # unreadable: fall back to the backoff
    return max(0.0, when.timestamp() - time.time())


def status_failure(status: int, message: str, headers: Any) -> Failure:
    """HTTP errors: 408, 409, 429 and 5xx are worth another attempt; other 4xx are not."""
    transient = status in (408, 409, 429) or status >= 500
    return Failure(f"HTTP {status}: {message[:300]}", transient, status, retry_after_of(headers))


class PerLoop(Generic[T]):
    """One value per event loop: SDK clients and semaphores belong to the loop that made them, so an LM
    shared by runs in several threads (each with its own loop) gives each loop its own.

    With `close`, a value is also closed in its own loop: when that loop shuts down (`asyncio.run`
    closes the async generators still open as it ends; `_closed_at_shutdown` is one) or on `aclose()`.
    So a client's connections never outlive the loop that opened them, and none is left for the garbage
    collector to complain about."""

    def __init__(self, make: Callable[[], T], close: Callable[[T], Awaitable[None]] | None = None) -> None:
        self._make = make
        self._close = close
        self._values: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = weakref.WeakKeyDictionary()
        self._guards: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncGenerator[None, None]]
        self._guards = weakref.WeakKeyDictionary()

    def get(self) -> T:
        """The running loop's value (made on first use). Values with `close` are taken with `aget`."""
        loop = asyncio.get_running_loop()
        value = self._values.get(loop)
        if value is None:
            value = self._values[loop] = self._make()
        return value

    async def aget(self) -> T:
        value = self.get()
        loop = asyncio.get_running_loop()
        if self._close is not None and loop not in self._guards:
            guard = _closed_at_shutdown(self._close, value)
            self._guards[loop] = guard
            await guard.__anext__()  # runs to its `yield` at once: the loop now tracks it
        return value

    async def aclose(self) -> None:
        """Close the running loop's value now (the next `aget` makes a fresh one)."""
        loop = asyncio.get_running_loop()
        self._values.pop(loop, None)
        guard = self._guards.pop(loop, None)
        if guard is not None:
            await guard.aclose()


async def _closed_at_shutdown(close: Callable[[T], Awaitable[None]], value: T) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await close(value)


async def call_with_retries(
    name: str,
    once: Callable[[int], Awaitable[LMResponse]],
    classify: Classifier,
    *,
    policy: RetryPolicy,
    gate: asyncio.Semaphore,
    limiter: RateLimiter | None = None,
    est_tokens: int = 0,
    deadline: float | None = None,
    on_retry: RetryNotice | None = None,
) -> LMResponse:
    """Run `once(attempt)` until it succeeds, a failure is not transient, the attempts run out, or
    `deadline` (a `time.monotonic()` value) passes: an attempt still running then is abandoned, and no
    attempt starts, nor a backoff sleeps, past it. `on_retry` hears of every attempt that will be retried."""
    errors: list[str] = []
    for attempt in range(1, policy.max_attempts + 1):
        failure: Failure | None = None
        cause: Exception | None = None
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise _past_deadline(name, attempt - 1, errors)
        try:
            response, reservation = await _bounded(_attempt(once, attempt, gate, limiter, est_tokens), left)
        except TransientModelError as exc:
            cause, failure = exc, Failure(str(exc), True, exc.status, exc.retry_after)
        except _DeadlineHit as exc:
            cause, failure = (
                exc,
                Failure(f"timeout: no complete reply within the {exc.seconds:.1f} s left", True),
            )
        except Exception as exc:
            cause, failure = exc, classify(exc)
            if failure is None:
                raise
        if failure is None:
            if limiter is not None and reservation is not None:
                limiter.settle(reservation, response.usage.input_tokens + response.usage.output_tokens)
            return replace(response, attempts=attempt, attempt_errors=tuple(errors))
        errors.append(f"attempt {attempt}: {failure.message}")
        if not failure.transient:
            raise ModelError(
                f"{name}: {failure.message}",
                attempts=attempt,
                status=failure.status,
                attempt_errors=tuple(errors),
            ) from cause
        if attempt < policy.max_attempts:
            delay = policy.delay(attempt, failure.retry_after)
            if deadline is not None and time.monotonic() + delay >= deadline:
                raise _past_deadline(name, attempt, errors) from cause
            if on_retry is not None:
                on_retry(attempt, failure.message, delay)
            await asyncio.sleep(delay)
    raise ModelError(
        f"{name}: failed after {policy.max_attempts} attempts; last error: {errors[-1]}",
        attempts=policy.max_attempts,
        attempt_errors=tuple(errors),
    )


class _DeadlineHit(Exception):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"no reply within {seconds:.1f} s")
        self.seconds = seconds


async def _attempt(
    once: Callable[[int], Awaitable[LMResponse]],
    attempt: int,
    gate: asyncio.Semaphore,
    limiter: RateLimiter | None,
    est_tokens: int,
) -> tuple[LMResponse, Any]:
    reservation = await limiter.acquire(est_tokens) if limiter is not None else None
    async with gate:
        return await once(attempt), reservation


async def _bounded(work: Awaitable[T], seconds: float | None) -> T:
    """`work`, abandoned after `seconds` (None: unbounded). A hung or trickling connection ends here
    whatever the HTTP library's own timeouts (which bound each read, not the whole reply)."""
    if seconds is None:
        return await work
    try:
        return await asyncio.wait_for(work, seconds)
    except asyncio.TimeoutError:
        raise _DeadlineHit(seconds) from None


def _past_deadline(name: str, attempts: int, errors: list[str]) -> ModelError:
    last = f"; last error: {errors[-1]}" if errors else ""
    return DeadlineExceeded(
        f"{name}: the run's deadline passed after {attempts} attempt(s){last}",
        attempts=attempts,
        attempt_errors=tuple(errors),
    )
