"""Retries, backoff, Retry-After, concurrency and failure reporting, through the scripted server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from examples.support_tickets.generate import QUESTION, generate

from policies import is_forced_final, is_rlm, is_sub, repl, tickets_policy, turn
from rlmx import RLM, CallSettings, Limits, ModelOptions
from rlmx.errors import ModelError
from rlmx.lm.openai_compat import OpenAICompatLM
from rlmx.lm.registry import resolve_model
from rlmx.lm.retry import RetryPolicy, retry_after_of
from rlmx.testing import Fault, ScriptedServer, random_faults

FAST = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05)


def records(path: str | None) -> list[dict[str, Any]]:
    assert path is not None
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def lm_calls(path: str | None) -> list[dict[str, Any]]:
    return [r for r in records(path) if r["type"] == "lm_call"]


def rlm(srv: ScriptedServer, retry: RetryPolicy = FAST, **kw: Any) -> RLM:
    options = ModelOptions(base_url=srv.url, retry=retry, timeout_s=kw.pop("timeout_s", 30.0))
    return RLM("openai:scripted", model_options=options, **kw)


def complete(lm: Any, text: str = "hi") -> Any:
    return asyncio.run(lm.complete([{"role": "user", "content": text}], CallSettings()))


def test_thirty_percent_faults_still_give_the_exact_tickets_answer_and_honest_usage() -> None:
    """429 with Retry-After, 500, stalls past the timeout, invalid JSON, empty choices: 30% of requests.

    Stalled replies would only be sent after an hour, so the server never serves (or bills) them; the
    client's timeout abandons them. Ten attempts per call make a call failing for good (0.3**10 per
    call) practically impossible, whatever order the concurrent requests arrive in.
    """
    text, gold, _ = generate(seed=0)
    faults = random_faults(0.3, seed=11, stall_s=3600.0, retry_after=0.05)
    retry = RetryPolicy(max_attempts=10, base_delay_s=0.01, max_delay_s=0.1)
    with ScriptedServer(tickets_policy, faults=faults) as srv:
        result = rlm(srv, retry=retry, timeout_s=5.0).run(QUESTION, text)
    requests = srv.requests
    served = srv.usage_served
    assert result.stopped_by == "final", result.error
    assert result.answer == gold
    kinds = {r.fault for r in requests if r.fault}
    assert kinds == {"429", "500", "stall", "invalid_json", "empty_choices"}  # every fault kind was hit
    assert 0.2 < sum(1 for r in requests if r.fault) / len(requests) < 0.4
    # usage is exactly what the server served: nothing from failed attempts, nothing twice
    assert result.usage["input_tokens"] == served["input_tokens"]
    assert result.usage["output_tokens"] == served["output_tokens"]
    calls = lm_calls(result.trace_path)
    # one logical call counts once, however many attempts it took; every attempt is in the trace
    assert result.usage["calls"] == len(calls) == srv.served < len(requests)
    assert sum(c["attempts"] for c in calls) == len(requests)
    assert sum(len(c["attempt_errors"]) for c in calls) == sum(1 for r in requests if r.fault)
    assert all(c["error"] is None for c in calls)
    errors = " ".join(e for c in calls for e in c["attempt_errors"])
    for phrase in ("HTTP 429", "HTTP 500", "timeout", "not JSON", "no choices"):
        assert phrase in errors


def test_retry_after_is_honoured_instead_of_the_backoff() -> None:
    first = {"done": False}

    def faults(request: Any) -> Fault | None:
        if first["done"]:
            return None
        first["done"] = True
        return Fault.status(429, retry_after=0.4)

    with ScriptedServer(lambda m, r: "ok", faults=faults) as srv:
        lm = resolve_model(
            "openai:scripted",
            ModelOptions(base_url=srv.url, retry=RetryPolicy(max_attempts=3, base_delay_s=0.0)),
        )
        response = complete(lm)
        one, two = srv.requests
    assert response.text == "ok" and response.attempts == 2
    assert response.attempt_errors[0].startswith("attempt 1: HTTP 429")
    assert one.t_replied is not None
    assert two.t_received - one.t_replied >= 0.35  # without Retry-After the wait would have been 0


def test_backoff_grows_exponentially_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=5.0)
    for attempt, full in ((1, 1.0), (2, 2.0), (3, 4.0)):
        delays = {policy.delay(attempt, None) for _ in range(50)}
        assert all(full * 0.5 <= d <= full for d in delays) and len(delays) > 1  # jittered
    assert policy.delay(6, None) <= 5.0
    assert policy.delay(1, 2.5) == 2.5 and policy.delay(1, 99.0) == 5.0


def test_a_client_error_is_not_retried() -> None:
    with ScriptedServer(lambda m, r: "x", faults=lambda r: Fault.status(400, message="bad")) as srv:
        lm = resolve_model("openai:scripted", ModelOptions(base_url=srv.url, retry=FAST))
        try:
            complete(lm)
        except ModelError as exc:
            error = exc
        else:
            raise AssertionError("a 400 must raise")
        assert len(srv.requests) == 1
    assert error.attempts == 1 and error.status == 400 and len(error.attempt_errors) == 1


def test_connection_drops_and_empty_content_are_retried() -> None:
    kinds = iter([Fault.disconnect(), Fault.empty_content(), None])
    with ScriptedServer(lambda m, r: "fine", faults=lambda r: next(kinds)) as srv:
        lm = resolve_model("openai:scripted", ModelOptions(base_url=srv.url, retry=FAST))
        response = complete(lm)
    assert response.text == "fine" and response.attempts == 3
    assert "connection error" in response.attempt_errors[0] and "empty reply" in response.attempt_errors[1]


def fail_marked(request: Any) -> Fault | None:
    """Every attempt of a sub-call whose prompt is FAIL gets HTTP 500."""
    return Fault.status(500) if request.messages and request.messages[-1]["content"] == "FAIL" else None


def test_a_batch_keeps_what_it_got_when_one_item_fails_for_good() -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if not is_rlm(request):
            return "sub-" + messages[-1]["content"]
        if turn(messages) == 0:
            return repl("labels = llm_query_batched(['a', 'b', 'FAIL', 'd'])\nprint(labels)")
        return "FINAL_VAR(labels)"

    with ScriptedServer(policy, faults=fail_marked) as srv:
        result = rlm(srv).run("q", "ctx")
        n_requests = len(srv.requests)
    assert result.stopped_by == "final"
    assert result.answer[:2] == ["sub-a", "sub-b"] and result.answer[3] == "sub-d"
    assert result.answer[2].startswith("[llm_query error]") and "failed after 3 attempts" in result.answer[2]
    calls = lm_calls(result.trace_path)
    failed = [c for c in calls if c["error"]]
    assert len(failed) == 1  # the trace says which item failed, with every attempt
    assert failed[0]["messages"][-1]["text"] == "FAIL" and failed[0]["attempts"] == 3
    assert [e.split(":")[0] for e in failed[0]["attempt_errors"]] == ["attempt 1", "attempt 2", "attempt 3"]
    assert result.usage["calls"] == 6  # 2 root turns + 4 sub-calls: the failed one counts once
    assert n_requests == 8  # ... though it made 3 requests


def test_a_single_llm_query_failing_for_good_raises_in_the_repl_and_the_run_goes_on() -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if turn(messages) == 0:
            return repl("try:\n    llm_query('FAIL')\nexcept Exception as exc:\n    print('caught:', exc)")
        return "FINAL(recovered)"

    with ScriptedServer(policy, faults=fail_marked) as srv:
        result = rlm(srv).run("q", "ctx")
        second_turn = srv.requests[-1].messages[-1]["content"]
    assert result.answer == "recovered"
    assert "caught:" in second_turn and "HTTP 500" in second_turn


def test_a_root_call_that_keeps_failing_ends_the_run_with_an_error_not_a_crash() -> None:
    with ScriptedServer(lambda m, r: "x", faults=lambda r: Fault.invalid_json()) as srv:
        result = rlm(srv).run("q", "ctx")
    assert result.stopped_by == "error" and result.answer is None
    assert result.error is not None and "failed after 3 attempts" in result.error
    (call,) = lm_calls(result.trace_path)
    assert call["attempts"] == 3 and len(call["attempt_errors"]) == 3 and call["counted"] is True


def test_concurrency_per_model_is_bounded() -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if not is_rlm(request):
            return "leaf"
        if is_forced_final(request):
            return "FINAL(x)"
        if turn(messages) == 0:
            return repl("r = llm_query_batched(['p%d' % i for i in range(8)])\nprint(len(r))")
        return "FINAL_VAR(r)"

    def latency(request: Any) -> float:
        return 0.15 if is_sub(request) else 0.0

    with ScriptedServer(policy, latency=latency) as srv:
        options = ModelOptions(base_url=srv.url, concurrency=2, retry=FAST)
        result = RLM("openai:scripted", model_options=options, trace=False).run("q", "ctx")
        subs = [r for r in srv.requests if is_sub(r)]
    assert result.answer == ["leaf"] * 8
    events = sorted([(r.t_received, 1) for r in subs] + [(r.t_replied or 0.0, -1) for r in subs])
    in_flight = peak = 0
    for _, step in events:
        in_flight += step
        peak = max(peak, in_flight)
    assert peak <= 2


def test_the_same_model_string_is_one_model_with_one_limit() -> None:
    with ScriptedServer(lambda m, r: "x") as srv:
        machine = RLM(
            "openai:scripted", sub_model="openai:scripted", model_options=ModelOptions(base_url=srv.url)
        )
        models = machine._models
    assert models.root is models.sub and isinstance(models.root, OpenAICompatLM)


def test_limits_still_count_logical_calls_under_retries() -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if is_forced_final(request):
            return "FINAL(stopped)"
        return repl(f"print({turn(messages)})")

    every_other = {"n": 0}

    def faults(request: Any) -> Fault | None:
        every_other["n"] += 1
        return Fault.status(503) if every_other["n"] % 2 else None

    with ScriptedServer(policy, faults=faults) as srv:
        result = rlm(srv, limits=Limits(max_llm_calls=4)).run("q", "ctx")
        n_requests = len(srv.requests)
    assert result.stopped_by == "max_llm_calls" and result.answer == "stopped"
    assert result.usage["calls"] == 4 and n_requests == 8


def test_retry_after_headers_in_seconds_milliseconds_or_an_http_date() -> None:
    import email.utils
    import time

    assert retry_after_of({"retry-after": "2"}) == 2.0
    assert retry_after_of({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    in_ten = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8.0 <= (retry_after_of({"retry-after": in_ten}) or 0.0) <= 10.0
    assert retry_after_of({"retry-after": "soon"}) is None and retry_after_of({}) is None
