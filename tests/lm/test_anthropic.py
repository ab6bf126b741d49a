"""The anthropic provider through the scripted server's Messages API, on the official SDK."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from examples.support_tickets.generate import QUESTION, generate

from policies import is_root, tickets_policy
from rlmx import RLM, CallSettings, ModelOptions
from rlmx.errors import ConfigError
from rlmx.lm.anthropic import AnthropicLM, to_anthropic
from rlmx.lm.registry import resolve_model
from rlmx.lm.retry import RetryPolicy
from rlmx.testing import Fault, Reply, ScriptedServer, random_faults

KEY = "sk-ant-test"
FAST = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05)


def claude(srv: ScriptedServer, **kw: Any) -> AnthropicLM:
    lm = resolve_model(
        "anthropic:claude-test", ModelOptions(base_url=srv.base_url, api_key=KEY, **{"retry": FAST, **kw})
    )
    assert isinstance(lm, AnthropicLM)
    return lm


def ask(lm: AnthropicLM, messages: list[dict[str, Any]], **settings: Any) -> Any:
    return asyncio.run(lm.complete(messages, CallSettings(**settings)))


def test_usage_includes_cache_reads_and_the_key_is_sent() -> None:
    reply = Reply("hello", input_tokens=1500, output_tokens=7, cached_tokens=1200)
    with ScriptedServer(lambda m, r: reply, auth_token=KEY) as srv:
        response = ask(claude(srv), [{"role": "user", "content": "hi"}], max_output_tokens=50)
        (request,) = srv.requests
        served = srv.usage_served
    assert response.text == "hello" and response.model == "anthropic:claude-test"
    # the server reported input_tokens=300 and cache_read_input_tokens=1200 (Anthropic counts them apart)
    assert response.usage.input_tokens == 1500 == served["input_tokens"]
    assert response.usage.cached_tokens == 1200 and response.usage.output_tokens == 7
    assert request.api == "anthropic" and request.error is None  # the server checked the key
    assert KEY in (request.headers.get("x-api-key"), request.headers.get("authorization", "")[7:])
    assert request.body["max_tokens"] == 50 and request.body["model"] == "claude-test"


def test_the_system_prompt_and_the_conversation_prefix_carry_cache_breakpoints() -> None:
    history = [
        {"role": "system", "content": "You are a Recursive Language Model."},
        {"role": "user", "content": "Question: q"},
        {"role": "assistant", "content": "```repl\nprint(1)\n```"},
        {"role": "user", "content": "Output:\n1"},
    ]
    with ScriptedServer(lambda m, r: "ok") as srv:
        ask(claude(srv), history)
        ask(claude(srv), [{"role": "user", "content": "a sub-call"}])
        turn, sub = srv.requests
    system = turn.body["system"]
    assert system == [{"type": "text", "text": history[0]["content"], "cache_control": {"type": "ephemeral"}}]
    roles = [m["role"] for m in turn.body["messages"]]
    assert roles == ["user", "assistant", "user"]
    marks = [bool(m["content"][0].get("cache_control")) for m in turn.body["messages"]]
    assert marks == [False, False, True]  # the newest message: next turn reads all of this from cache
    assert turn.messages[0] == {"role": "system", "content": history[0]["content"]}
    assert "system" not in sub.body and "cache_control" not in sub.body["messages"][0]["content"][0]


def test_prompt_caching_can_be_switched_off() -> None:
    with ScriptedServer(lambda m, r: "ok") as srv:
        lm = claude(srv, extra={"prompt_caching": "false"})
        ask(lm, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
        (request,) = srv.requests
    assert "cache_control" not in json.dumps(request.body)


def test_messages_are_made_valid_for_the_api() -> None:
    system, turns = to_anthropic(
        [
            {"role": "assistant", "content": "prefill"},
            {"role": "user", "content": "one"},
            {"role": "user", "content": ""},
        ],
        prompt_caching=False,
    )
    assert system == []
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]  # starts with user, alternates
    assert turns[2]["content"][0]["text"] == "one\n\n(empty)"  # merged; never an empty text block


def test_overload_rate_limit_bad_json_and_empty_content_are_retried() -> None:
    faults = iter(
        [Fault.status(529), Fault.status(429, retry_after=0.01), Fault.invalid_json(), Fault.empty_choices()]
    )
    with ScriptedServer(lambda m, r: "finally", faults=lambda r: next(faults, None)) as srv:
        lm = claude(srv, timeout_s=5.0, retry=RetryPolicy(max_attempts=6, base_delay_s=0.01))
        response = ask(lm, [{"role": "user", "content": "x"}])
        assert len(srv.requests) == 5
    assert response.text == "finally" and response.attempts == 5
    assert [e.split(":")[0] for e in response.attempt_errors] == [f"attempt {i}" for i in range(1, 5)]
    assert "HTTP 529" in response.attempt_errors[0] and "HTTP 429" in response.attempt_errors[1]


def test_the_tickets_example_runs_on_anthropic_with_faults_and_honest_usage(tmp_path: Path) -> None:
    text, gold, _ = generate(seed=2)

    def policy(messages: list[dict[str, Any]], request: Any) -> Reply:
        answer = tickets_policy(messages, request)
        chars = sum(len(m["content"]) for m in messages)
        cached = chars // 8 if is_root(request) else 0  # pretend half the root prefix came from the cache
        return Reply(answer, input_tokens=chars // 4 + 1, cached_tokens=cached)

    faults = random_faults(0.2, seed=5, kinds=("429", "529", "invalid_json"), retry_after=0.01)
    with ScriptedServer(policy, faults=faults, auth_token=KEY) as srv:
        options = ModelOptions(base_url=srv.base_url, api_key=KEY, retry=RetryPolicy(10, 0.01, 0.05))
        result = RLM("anthropic:claude-test", model_options=options, trace=tmp_path / "t.jsonl").run(
            QUESTION, text
        )
        served = srv.usage_served
        cache_reads = sum(  # what the server reported as cache_read_input_tokens on delivered replies
            sum(len(m["content"]) for m in r.messages) // 8
            for r in srv.requests
            if r.status == 200 and r.fault is None and is_root(r)
        )
    assert result.stopped_by == "final" and result.answer == gold
    assert result.usage["input_tokens"] == served["input_tokens"]
    assert result.usage["output_tokens"] == served["output_tokens"]
    calls = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    calls = [c for c in calls if c["type"] == "lm_call"]
    assert result.usage["cached_tokens"] == sum(c["cached_tokens"] for c in calls) == cache_reads > 0
    assert all(c["model"] == "anthropic:claude-test" for c in calls)


def test_a_missing_key_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        resolve_model("anthropic:claude-sonnet-4-5")
