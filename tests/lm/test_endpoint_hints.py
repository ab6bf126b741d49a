"""Base-URL mistakes said at once: nothing listening on a loopback port (a run's first call ends after
one quick retry, not the whole retry schedule), and a base URL without `/v1` (the 404 hints at it). A
refusal after the endpoint has answered is an outage: the full schedule still applies."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from rlmx.errors import ModelError
from rlmx.lm.base import CallSettings
from rlmx.lm.openai_compat import OpenAICompatLM
from rlmx.lm.retry import RetryPolicy
from rlmx.testing import ScriptedServer

MESSAGES = [{"role": "user", "content": "hi"}]


def free_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def call(lm: OpenAICompatLM) -> object:
    return asyncio.run(lm.complete(MESSAGES, CallSettings()))


def test_a_refused_loopback_first_call_fails_quickly_naming_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    policy = RetryPolicy()  # the default schedule: 6 attempts, at least 7.75 s of backoff in all
    full_schedule = sum(policy.base_delay_s * 2 ** (n - 1) * 0.5 for n in range(1, policy.max_attempts))
    started = time.monotonic()
    with pytest.raises(ModelError) as raised:
        call(OpenAICompatLM("x", base_url=url, retry=policy))
    elapsed = time.monotonic() - started
    assert elapsed < full_schedule / 2, elapsed
    assert raised.value.attempts == 2  # one quick retry, then the error
    message = str(raised.value)
    assert url in message and "connection refused" in message and "\n" not in message


def test_a_refusal_after_the_endpoint_answered_keeps_the_retries() -> None:
    srv = ScriptedServer(lambda messages, request: "hello").start()
    lm = OpenAICompatLM("x", base_url=srv.url, retry=RetryPolicy(max_attempts=4, base_delay_s=0.01))
    try:
        assert call(lm).text == "hello"  # type: ignore[attr-defined]
    finally:
        srv.stop()  # the server goes away mid-run: its port now refuses connections
    with pytest.raises(ModelError) as raised:
        call(lm)
    assert raised.value.attempts == 4
    assert "failed after 4 attempts" in str(raised.value)


def test_a_404_from_a_base_url_without_v1_hints_at_v1() -> None:
    with ScriptedServer(lambda messages, request: "hello") as srv:
        base = srv.base_url
        lm = OpenAICompatLM("x", base_url=base, retry=RetryPolicy(max_attempts=3, base_delay_s=0.01))
        with pytest.raises(ModelError) as raised:
            call(lm)
        again = OpenAICompatLM("x", base_url=f"{base}/api", retry=RetryPolicy(max_attempts=1))
        with pytest.raises(ModelError) as elsewhere:
            call(again)
    message = str(raised.value)
    assert raised.value.status == 404 and raised.value.attempts == 1
    assert message.endswith(f"(did you mean {base}/v1?)"), message
    assert "did you mean" not in str(elsewhere.value)  # /api/v1 does not answer either: no hint
