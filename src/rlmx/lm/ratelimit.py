"""An optional requests-per-minute / tokens-per-minute limiter for one model (a sliding 60 s window).

Every attempt reserves one request and its estimated tokens before it is sent; when the reply comes
back, the reservation is corrected to the tokens actually used. A request that alone exceeds the
token budget is let through when the window is empty, so it cannot wait forever.

`window_s` shortens or lengthens the window, the budgets scaling with it (60 requests a minute over a
2 s window: 2 requests in any 2 s); `slack_s` keeps each reservation that much longer, so requests
that reach the provider later than they were granted still fit its window (a fleet's, rlmx.batch).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable

from rlmx.errors import ConfigError

WINDOW_S = 60.0


class Reservation:
    __slots__ = ("t", "tokens")

    def __init__(self, t: float, tokens: int) -> None:
        self.t = t
        self.tokens = tokens


class RateLimiter:
    """Waits (asynchronously) until one more request fits the per-minute budgets, then reserves it."""

    def __init__(
        self,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        window_s: float = WINDOW_S,
        slack_s: float = 0.0,
    ) -> None:
        if requests_per_minute is not None and requests_per_minute < 1:
            raise ConfigError("requests_per_minute must be >= 1")
        if tokens_per_minute is not None and tokens_per_minute < 1:
            raise ConfigError("tokens_per_minute must be >= 1")
        if window_s <= 0 or slack_s < 0:
            raise ConfigError("the rate limit's window must be > 0 s (and its slack >= 0 s)")
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self._clock = clock
        self._sleep = sleep
        self.window_s = window_s
        self._hold_s = window_s + slack_s  # how long a reservation counts
        scale = window_s / WINDOW_S
        rpm, tpm = requests_per_minute, tokens_per_minute
        self.max_requests = None if rpm is None else max(1, int(rpm * scale + 1e-9))  # per window
        self.max_tokens = None if tpm is None else max(1, int(tpm * scale + 1e-9))
        self._window: deque[Reservation] = deque()
        self.waited_s = 0.0  # total time callers spent waiting, for reports

    def __repr__(self) -> str:
        window = "" if self.window_s == WINDOW_S else f", window_s={self.window_s:g}"
        return f"RateLimiter(rpm={self.requests_per_minute}, tpm={self.tokens_per_minute}{window})"

    def _expire(self, now: float) -> None:
        while self._window and now - self._window[0].t >= self._hold_s:
            self._window.popleft()

    def _wait_needed(self, now: float, tokens: int) -> float:
        """Seconds until a request of `tokens` fits; 0 when it fits now."""
        self._expire(now)
        if not self._window:
            return 0.0
        waits = [0.0]
        if self.max_requests is not None and len(self._window) >= self.max_requests:
            oldest = self._window[len(self._window) - self.max_requests]
            waits.append(oldest.t + self._hold_s - now)
        if self.max_tokens is not None:
            used = sum(r.tokens for r in self._window)
            excess = used + tokens - self.max_tokens
            for entry in self._window:  # wait until enough old reservations have left the window
                if excess <= 0:
                    break
                excess -= entry.tokens
                waits.append(entry.t + self._hold_s - now)
        return max(waits)

    def try_acquire(self, tokens: int = 0) -> tuple[Reservation | None, float]:
        """Reserve now when one more request fits: (the reservation, 0); else (None, seconds to wait)."""
        now = self._clock()
        wait = self._wait_needed(now, tokens)
        if wait > 0:
            return None, wait
        reservation = Reservation(now, max(0, tokens))
        self._window.append(reservation)
        return reservation, 0.0

    async def acquire(self, tokens: int = 0) -> Reservation:
        """Reserve one request of about `tokens` tokens, waiting for room in the window first."""
        while True:
            reservation, wait = self.try_acquire(tokens)
            if reservation is not None:
                return reservation
            self.waited_s += wait
            await self._sleep(wait)

    def settle(self, reservation: Reservation, actual_tokens: int) -> None:
        """Correct a reservation to the tokens the call really used."""
        reservation.tokens = max(0, actual_tokens)
