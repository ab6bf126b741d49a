"""`litellm:` models, through LiteLLM's OpenAI-compatible route to the scripted server: a tickets run
answered exactly, usage equal to what the server served, every retry rlmx's own (one request per attempt,
faults included), deadlines, headers only to loopback, prices, and LiteLLM's import kept quiet and
offline. Bedrock and Vertex cannot be reached from here: only how their failures are classified is.

LiteLLM is in the `dev` extra: without it these tests skip locally and fail under CI=true."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("litellm") is None:  # pragma: no cover - depends on the install
    if os.environ.get("CI") == "true":
        pytest.fail("litellm is not installed; it is in the dev extra (scripts/setup.sh installs it)")
    pytest.skip("litellm is not installed: pip install 'rlmx[litellm]'", allow_module_level=True)

from examples.support_tickets.generate import QUESTION, generate

from policies import tickets_policy
from rlmx import RLM, CallSettings, ModelOptions, resolve_model
from rlmx.errors import DeadlineExceeded, ModelError, RealProviderForbidden
from rlmx.lm.base import Usage
from rlmx.lm.guard import FORBID_ENV
from rlmx.lm.litellm_lm import LiteLLMLM, classify_litellm_error, load_litellm
from rlmx.lm.retry import RetryPolicy
from rlmx.pricing import Price, Pricing
from rlmx.testing import Fault, Reply, ScriptedServer, random_faults

FAST = RetryPolicy(max_attempts=10, base_delay_s=0.01, max_delay_s=0.05)
MODEL = "litellm:openai/scripted"


@pytest.fixture(scope="module")
def litellm() -> Any:
    return load_litellm()


def lm_calls(path: str | None) -> list[dict[str, Any]]:
    assert path is not None
    records = [json.loads(line) for line in Path(path).read_text().splitlines()]
    return [r for r in records if r["type"] == "lm_call"]


def complete(lm: Any, **settings: Any) -> Any:
    call = CallSettings(purpose="root", depth=0, iteration=1, **settings)
    return asyncio.run(lm.complete([{"role": "user", "content": "hello"}], call))


def run_tickets(srv: ScriptedServer, retry: RetryPolicy = FAST, timeout_s: float = 30.0) -> Any:
    text, gold, _ = generate(seed=3)
    options = ModelOptions(base_url=srv.url, retry=retry, timeout_s=timeout_s)
    return RLM(MODEL, model_options=options).run(QUESTION, text), gold


def test_a_tickets_run_through_litellm_is_answered_exactly_with_the_usage_served(litellm: Any) -> None:
    with ScriptedServer(tickets_policy) as srv:
        started = time.monotonic()
        result, gold = run_tickets(srv)
        elapsed = time.monotonic() - started
        requests, served = srv.requests, srv.usage_served
    assert result.stopped_by == "final", result.error
    assert result.answer == gold
    # usage is exactly what the server served, booked under the litellm model's name
    assert result.usage["input_tokens"] == served["input_tokens"]
    assert result.usage["output_tokens"] == served["output_tokens"]
    assert result.usage["calls"] == srv.served == len(requests)
    assert list(result.usage["by_model"]) == [MODEL]
    # `--base-url` is LiteLLM's api_base; the calls say what they are for (a loopback server)
    assert {r.path for r in requests} == {"/v1/chat/completions"} and {r.model for r in requests} == {
        "scripted"
    }
    assert {r.purpose for r in requests} == {"root", "llm_query"}
    assert all(set(r.body) <= {"model", "messages", "max_tokens", "temperature"} for r in requests)
    print(f"\n[litellm] tickets run: {len(requests)} requests in {elapsed:.2f} s")


def test_under_injected_faults_every_retry_is_rlmx_s_one_request_per_attempt(litellm: Any) -> None:
    """429 with Retry-After, 500, 503, dropped connections, stalls past the timeout, invalid JSON and
    empty choices: LiteLLM makes one request per attempt and rlmx's loop makes every attempt."""
    faults = random_faults(
        0.25,
        seed=5,
        kinds=("429", "500", "503", "disconnect", "stall", "invalid_json", "empty_choices"),
        stall_s=3600.0,
        retry_after=0.02,
    )
    with ScriptedServer(tickets_policy, faults=faults) as srv:
        result, gold = run_tickets(srv, timeout_s=1.5)
        requests, served = srv.requests, srv.usage_served
    assert result.stopped_by == "final", result.error
    assert result.answer == gold
    faulted = [r for r in requests if r.fault]
    assert len({r.fault for r in faulted}) >= 5, {r.fault for r in faulted}
    calls = lm_calls(result.trace_path)
    # the server saw exactly the attempts rlmx made: no request LiteLLM repeated on its own
    assert sum(c["attempts"] for c in calls) == len(requests)
    assert sum(len(c["attempt_errors"]) for c in calls) == len(faulted)
    assert result.usage["calls"] == len(calls) == srv.served
    assert result.usage["input_tokens"] == served["input_tokens"]
    assert result.usage["output_tokens"] == served["output_tokens"]
    errors = " ".join(e for c in calls for e in c["attempt_errors"])
    for phrase in ("HTTP 429", "HTTP 500", "timeout", "no choices"):
        assert phrase in errors, phrase


def test_litellm_s_own_retries_are_off_and_a_bad_request_is_not_retried(litellm: Any) -> None:
    with ScriptedServer(lambda m, r: "x", faults=lambda r: Fault.status(500)) as srv:
        lm = resolve_model(MODEL, ModelOptions(base_url=srv.url, retry=RetryPolicy(max_attempts=1)))
        with pytest.raises(ModelError):
            complete(lm)
        assert len(srv.requests) == 1  # LiteLLM alone would have sent a 500 twice
    with ScriptedServer(lambda m, r: "x", faults=lambda r: Fault.status(400, message="bad field")) as srv:
        lm = resolve_model(MODEL, ModelOptions(base_url=srv.url, retry=FAST))
        with pytest.raises(ModelError) as caught:
            complete(lm)
        assert len(srv.requests) == 1
        url = srv.url
    assert caught.value.status == 400 and caught.value.attempts == 1
    assert MODEL in str(caught.value) and url in str(caught.value) and "bad field" in str(caught.value)


def test_retry_after_and_on_retry_are_honoured(litellm: Any) -> None:
    faults = iter([Fault.status(429, retry_after=0.3), Fault.empty_content()])
    heard: list[tuple[int, str, float]] = []
    retry = RetryPolicy(max_attempts=5, base_delay_s=0.01, max_delay_s=5.0)  # Retry-After not capped
    with ScriptedServer(lambda m, r: "at last", faults=lambda r: next(faults, None)) as srv:
        lm = resolve_model(MODEL, ModelOptions(base_url=srv.url, retry=retry))
        started = time.monotonic()
        response = complete(lm, on_retry=lambda n, error, wait: heard.append((n, error, wait)))
        waited = time.monotonic() - started
        assert len(srv.requests) == 3
    assert response.text == "at last" and response.attempts == 3
    assert [n for n, _, _ in heard] == [1, 2] and heard[0][2] == pytest.approx(0.3)
    assert "HTTP 429" in heard[0][1] and "empty reply" in heard[1][1] and waited >= 0.3


def test_the_call_s_deadline_bounds_a_stalled_request(litellm: Any) -> None:
    with ScriptedServer(lambda m, r: "late", faults=lambda r: Fault.stall(30)) as srv:
        lm = resolve_model(MODEL, ModelOptions(base_url=srv.url, retry=FAST))
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            complete(lm, deadline=time.monotonic() + 0.5)
        assert time.monotonic() - started < 3 and len(srv.requests) == 1


def test_call_headers_go_to_loopback_only_and_real_endpoints_are_guarded(
    litellm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = CallSettings(max_output_tokens=32, purpose="llm_query", depth=1)
    local = LiteLLMLM("openai/m", api_base="http://127.0.0.1:9/v1")
    request = local.request([{"role": "user", "content": "x"}], settings)
    assert request["extra_headers"] == {"x-rlmx-purpose": "llm_query", "x-rlmx-depth": "1"}
    assert request["num_retries"] == 0 and request["max_retries"] == 0 and request["max_tokens"] == 32
    assert request["api_base"] == "http://127.0.0.1:9/v1" and request["api_key"]  # a placeholder key
    # under the guard, nothing but this machine: the route's own provider and remote bases are refused
    for spec, base in [("litellm:bedrock/anthropic.claude-x", None), (MODEL, "https://llm.example.com/v1")]:
        with pytest.raises(RealProviderForbidden):
            resolve_model(spec, ModelOptions(base_url=base))
    monkeypatch.delenv(FORBID_ENV)  # building only: nothing is sent
    remote = LiteLLMLM("bedrock/anthropic.claude-x")
    request = remote.request([{"role": "user", "content": "x"}], settings)
    assert "extra_headers" not in request and "api_base" not in request and "api_key" not in request
    assert not any("rlmx" in str(key) for key in request)


def test_prices_come_from_genai_prices_by_route_else_from_litellm_s_map(litellm: Any) -> None:
    usage = Usage(input_tokens=1000, output_tokens=50, cached_tokens=400)
    pricing = Pricing()
    # genai-prices knows it: the route names the catalog provider
    assert pricing("litellm:openai/gpt-4o-mini", usage) == pytest.approx(pricing("openai:gpt-4o-mini", usage))
    bedrock = "litellm:bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    assert pricing(bedrock, usage) is not None and pricing.source(bedrock) == "genai-prices"
    # a model only LiteLLM's map has: the price LiteLLM's response_cost is computed from
    litellm.register_model(
        {
            "openai/rlmx-test-priced": {
                "input_cost_per_token": 1e-6,
                "output_cost_per_token": 2e-6,
                "cache_read_input_token_cost": 1e-7,
                "litellm_provider": "openai",
                "mode": "chat",
            }
        }
    )
    name = "litellm:openai/rlmx-test-priced"
    reply = Reply("FINAL(7)", input_tokens=1000, output_tokens=50, cached_tokens=400)
    with ScriptedServer(lambda m, r: reply) as srv:
        response = asyncio.run(
            litellm.acompletion(
                model="openai/rlmx-test-priced",
                messages=[{"role": "user", "content": "x"}],
                api_base=srv.url,
                api_key="x",
                num_retries=0,
                max_retries=0,
            )
        )
        result = RLM(name, model_options=ModelOptions(base_url=srv.url)).run("q", "ctx")
    litellm_says = response._hidden_params["response_cost"]
    assert litellm_says == pytest.approx(0.6e-3 + 0.04e-3 + 0.1e-3)
    assert result.usage["cached_tokens"] == 400
    assert result.usage["cost_usd"] == pytest.approx(litellm_says)
    assert pricing.source(name) == "litellm's price map"
    # an override wins over both; a model nobody prices stays unpriced
    assert Pricing({name: Price(1.0, 1.0)})(name, usage) == pytest.approx(1050 / 1e6)
    assert pricing("litellm:openai/nobody-prices-this", usage) is None


def test_classifier_decides_by_litellm_s_status_and_stops_on_setup_errors(litellm: Any) -> None:
    import httpx

    response = httpx.Response(429, headers={"retry-after": "2"}, request=httpx.Request("POST", "http://x"))
    limited = litellm.exceptions.RateLimitError("slow down", "openai", "m", response=response)
    failure = classify_litellm_error(limited)
    assert failure is not None and failure.transient and failure.status == 429 and failure.retry_after == 2.0
    bad = classify_litellm_error(litellm.exceptions.BadRequestError("no", "m", "openai"))
    assert bad is not None and not bad.transient and bad.status == 400
    timeout = classify_litellm_error(litellm.exceptions.Timeout("slow", "m", "openai"))
    assert timeout is not None and timeout.transient and timeout.message.startswith("timeout")
    # a route whose package is missing (vertex_ai/ without google-auth) cannot succeed: no retries
    missing = litellm.exceptions.APIConnectionError("No module named 'google'", "openai", "m")
    missing.__cause__ = ModuleNotFoundError("No module named 'google'")
    failure = classify_litellm_error(missing)
    assert failure is not None and not failure.transient and "google" in failure.message
    assert classify_litellm_error(ValueError("ours")) is None  # not LiteLLM's: propagates


def test_bedrock_without_credentials_fails_at_once_naming_the_model(
    litellm: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No AWS credentials: LiteLLM says so (HTTP 401) before sending anything; rlmx does not retry."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION_NAME", "us-east-1")
    spec = "litellm:bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    lm = resolve_model(spec, ModelOptions(base_url="http://127.0.0.1:9", retry=FAST))
    with pytest.raises(ModelError) as caught:
        complete(lm)
    assert caught.value.attempts == 1 and spec in str(caught.value)
    assert "credentials" in str(caught.value).lower()


def test_nothing_reaches_stdout_when_a_call_fails(litellm: Any, capfd: pytest.CaptureFixture[str]) -> None:
    with ScriptedServer(lambda m, r: "x", faults=lambda r: Fault.status(401)) as srv:
        lm = resolve_model(MODEL, ModelOptions(base_url=srv.url, retry=FAST))
        with pytest.raises(ModelError):
            complete(lm)
    out, _ = capfd.readouterr()
    assert out == ""  # LiteLLM's "Give Feedback / Get Help" banner stays off


def test_importing_litellm_through_rlmx_uses_the_bundled_price_map_and_no_network() -> None:
    """A fresh process that refuses every non-loopback connection imports LiteLLM through rlmx."""
    script = """
import os, socket, sys, time
real_connect = socket.socket.connect
def refuse(self, address):
    if isinstance(address, tuple) and not str(address[0]).startswith("127."):
        print("connect attempt", address, file=sys.stderr)
        raise OSError("no network here")
    return real_connect(self, address)
socket.socket.connect = refuse
os.environ.pop("LITELLM_LOCAL_MODEL_COST_MAP", None)
started = time.monotonic()
from rlmx.lm.litellm_lm import load_litellm
litellm = load_litellm()
print(round(time.monotonic() - started, 2), os.environ["LITELLM_LOCAL_MODEL_COST_MAP"], litellm.suppress_debug_info)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "connect attempt" not in proc.stderr
    seconds, local_map, quiet = proc.stdout.split()
    assert local_map == "True" and quiet == "True"
    print(f"\n[litellm] import through rlmx: {seconds} s")


def test_sampling_settings_reach_every_request_body(litellm: Any) -> None:
    with ScriptedServer(lambda m, r: "ok") as srv:
        lm = resolve_model(MODEL, ModelOptions(base_url=srv.url, temperature=0.3, top_p=0.9))
        complete(lm, max_output_tokens=16)
        complete(lm)
        first, second = srv.requests
    assert {k: first.body.get(k) for k in ("temperature", "top_p", "max_tokens")} == {
        "temperature": 0.3,
        "top_p": 0.9,
        "max_tokens": 16,
    }
    assert second.body["temperature"] == 0.3 and second.body["top_p"] == 0.9


def test_the_response_cache_answers_a_repeated_run_without_a_request(litellm: Any, tmp_path: Path) -> None:
    text, gold, _ = generate(seed=3)
    with ScriptedServer(tickets_policy) as srv:
        options = ModelOptions(base_url=srv.url, retry=FAST)
        first = RLM(MODEL, model_options=options, cache=tmp_path / "cache.sqlite").run(QUESTION, text)
        sent = len(srv.requests)
        again = RLM(MODEL, model_options=options, cache=tmp_path / "cache.sqlite").run(QUESTION, text)
        assert len(srv.requests) == sent  # every call of the second run came from the cache
    assert first.answer == again.answer == gold
    assert again.usage["calls"] == 0 and first.usage["calls"] == sent
