"""The requests/tokens-per-minute limiter, on a fake clock (no real waiting), and wired into a model."""

from __future__ import annotations

import asyncio

from rlmx import CallSettings, ModelOptions
from rlmx.lm.ratelimit import RateLimiter
from rlmx.lm.registry import resolve_model
from rlmx.testing import ScriptedServer


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def limiter(clock: FakeClock, rpm: int | None = None, tpm: int | None = None) -> RateLimiter:
    return RateLimiter(rpm, tpm, clock=clock, sleep=clock.sleep)


def test_requests_per_minute_makes_the_extra_request_wait_for_the_window() -> None:
    clock = FakeClock()
    lim = limiter(clock, rpm=2)

    async def go() -> None:
        await lim.acquire()
        clock.now += 10
        await lim.acquire()
        await lim.acquire()  # the third in the same minute waits until the first leaves the window

    asyncio.run(go())
    assert clock.sleeps == [50.0]
    assert lim.waited_s == 50.0


def test_tokens_per_minute_counts_estimates_then_actual_usage() -> None:
    clock = FakeClock()
    lim = limiter(clock, tpm=1000)

    async def go() -> None:
        first = await lim.acquire(600)
        lim.settle(first, 100)  # the call used far less than estimated
        await lim.acquire(600)  # fits now: 100 + 600 <= 1000
        assert clock.sleeps == []
        clock.now += 5
        await lim.acquire(600)  # 700 + 600 > 1000: wait until enough old reservations expire

    asyncio.run(go())
    assert clock.sleeps == [55.0]  # the first two (700 tokens) were made at t=0


def test_a_request_larger_than_the_budget_goes_alone_instead_of_waiting_forever() -> None:
    clock = FakeClock()
    lim = limiter(clock, tpm=100)

    async def go() -> None:
        await lim.acquire(5000)
        await lim.acquire(10)

    asyncio.run(go())
    assert clock.sleeps == [60.0]


def test_model_options_put_a_limiter_in_front_of_every_attempt() -> None:
    assert ModelOptions().limiter() is None
    with ScriptedServer(lambda m, r: "ok") as srv:
        lm = resolve_model("openai:scripted", ModelOptions(base_url=srv.url, requests_per_minute=100))
        lim = lm.limiter  # type: ignore[attr-defined]
        assert isinstance(lim, RateLimiter)

        async def go() -> list[str]:
            msgs = [{"role": "user", "content": "hello there"}]
            replies = await asyncio.gather(*(lm.complete(msgs, CallSettings()) for _ in range(3)))
            return [r.text for r in replies]

        assert asyncio.run(go()) == ["ok"] * 3
        served = srv.usage_served
    window = list(lim._window)
    assert len(window) == 3  # one reservation per request
    # reservations are settled to the tokens the server reported
    assert sum(r.tokens for r in window) == served["input_tokens"] + served["output_tokens"]
