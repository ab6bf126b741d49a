"""Tests of rlmx.testing.server.ScriptedServer through real HTTP clients."""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from rlmx import RLM, Limits, ModelOptions
from rlmx.lm.base import CallSettings
from rlmx.testing import ScriptedModel
from rlmx.testing.server import Fault, Reply, ScriptedRequest, ScriptedServer, random_faults

MESSAGES: list[Any] = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "say hello"}]


def echo(messages: list[dict[str, Any]], request: ScriptedRequest) -> str:
    return f"echo: {messages[-1]['content']}"


def chat(url: str, messages: list[Any] = MESSAGES, **extra: Any) -> httpx.Response:
    return httpx.post(
        f"{url}/chat/completions", json={"model": "m", "messages": messages, **extra}, timeout=5
    )


def client(srv: ScriptedServer, api_key: str = "x") -> OpenAI:
    return OpenAI(base_url=srv.url, api_key=api_key, max_retries=0)


# -- the OpenAI API through the real client ----------------------------------------------


def test_plain_completion_through_openai_client() -> None:
    seen: list[list[dict[str, Any]]] = []

    def policy(messages: list[dict[str, Any]], request: ScriptedRequest) -> str:
        seen.append(messages)
        return "hello there, friend"

    with ScriptedServer(policy) as srv:
        assert srv.url.startswith("http://127.0.0.1:") and srv.url.endswith("/v1")
        resp = client(srv).chat.completions.create(model="gpt-test", messages=MESSAGES)
        assert resp.choices[0].message.content == "hello there, friend"
        assert resp.choices[0].finish_reason == "stop"
        assert resp.object == "chat.completion" and resp.model == "gpt-test" and resp.id
        assert seen == [MESSAGES]
        prompt = math.ceil(len("be brief" + "say hello") / 4)
        completion = math.ceil(len("hello there, friend") / 4)
        assert resp.usage is not None
        assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (prompt, completion)
        assert resp.usage.total_tokens == prompt + completion
        assert srv.served == 1
        assert srv.usage_served == {"input_tokens": prompt, "output_tokens": completion}


def test_explicit_reply_usage_cost_and_cache() -> None:
    def policy(messages: list[dict[str, Any]], request: ScriptedRequest) -> Reply:
        return Reply(
            "ok", input_tokens=100, output_tokens=7, cached_tokens=60, cost=0.0123, finish_reason="length"
        )

    with ScriptedServer(policy) as srv:
        body = chat(srv.url).json()
        assert body["choices"][0]["finish_reason"] == "length"
        usage = body["usage"]
        assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (100, 7, 107)
        assert usage["prompt_tokens_details"]["cached_tokens"] == 60
        assert usage["cost"] == pytest.approx(0.0123)
        resp = client(srv).chat.completions.create(model="m", messages=MESSAGES)
        assert resp.usage is not None and resp.usage.prompt_tokens_details is not None
        assert resp.usage.prompt_tokens_details.cached_tokens == 60
        assert srv.usage_served == {"input_tokens": 200, "output_tokens": 14}


def test_content_parts_are_flattened_and_none_content_tolerated() -> None:
    with ScriptedServer(echo) as srv:
        parts = [{"type": "text", "text": "one "}, {"type": "image_url", "image_url": {"url": "x"}}]
        messages = [
            {"role": "assistant", "content": None},
            {"role": "user", "content": [*parts, {"type": "text", "text": "two"}]},
        ]
        assert chat(srv.url, messages).json()["choices"][0]["message"]["content"] == "echo: one two"
        assert srv.requests[0].messages == [
            {"role": "assistant", "content": ""},
            {"role": "user", "content": "one two"},
        ]


def test_streaming_through_openai_client_reassembles_text_and_usage() -> None:
    text = "The quick brown fox jumps over the lazy dog."
    with ScriptedServer(lambda m, r: text) as srv:
        stream = client(srv).chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
        assert "".join(pieces) == text
        assert len(pieces) >= 3  # delivered in several pieces
        assert all(c.object == "chat.completion.chunk" for c in chunks)
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        assert finishes == ["stop"]
        usage = chunks[-1].usage
        assert usage is not None and chunks[-1].choices == []
        assert usage.completion_tokens == math.ceil(len(text) / 4)
        assert srv.served == 1 and srv.requests[0].reply_text == text


def test_streaming_without_include_usage_sends_no_usage_chunk() -> None:
    with ScriptedServer(echo) as srv:
        with httpx.stream(
            "POST", f"{srv.url}/chat/completions", json={"messages": MESSAGES, "stream": True}
        ) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = [line for line in r.iter_lines() if line.startswith("data: ")]
        assert lines[-1] == "data: [DONE]"
        chunks = [json.loads(line[6:]) for line in lines[:-1]]
        assert all("usage" not in c for c in chunks)
        assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "echo: say hello"


def test_models_endpoint_lists_configured_models() -> None:
    with ScriptedServer(echo, models=("alpha", "beta")) as srv:
        assert [m.id for m in client(srv).models.list()] == ["alpha", "beta"]
        body = httpx.get(f"{srv.url}/models").json()
        assert body["object"] == "list" and body["data"][0]["object"] == "model"
        assert srv.requests == []  # only completion requests are logged


def test_unknown_path_and_bad_json() -> None:
    with ScriptedServer(echo) as srv:
        r = httpx.post(f"{srv.url}/nope", json={})
        assert r.status_code == 404 and "error" in r.json()
        assert httpx.get(f"{srv.url}/nope").status_code == 404
        r = httpx.post(
            f"{srv.url}/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
        assert [q.status for q in srv.requests] == [404, 400]
        assert srv.requests[1].error and srv.served == 0


def test_policy_exception_becomes_500_and_is_logged() -> None:
    def policy(messages: list[dict[str, Any]], request: ScriptedRequest) -> str:
        raise RuntimeError("script ran out of turns")

    with ScriptedServer(policy) as srv:
        with pytest.raises(openai.InternalServerError, match="script ran out of turns"):
            client(srv).chat.completions.create(model="m", messages=MESSAGES)
        req = srv.requests[0]
        assert req.status == 500 and req.error is not None and "script ran out of turns" in req.error
        assert srv.served == 0


def test_bad_policy_result_and_raising_fault_function_become_500() -> None:
    with ScriptedServer(lambda m, r: 42) as srv:  # type: ignore[arg-type, return-value]
        r = chat(srv.url)
        assert r.status_code == 500 and "expected str or Reply" in r.json()["error"]["message"]

    def bad_faults(request: ScriptedRequest) -> Fault | None:
        raise KeyError("oops")

    with ScriptedServer(echo, faults=bad_faults) as srv:
        assert chat(srv.url).status_code == 500
        assert srv.requests[0].error is not None and "KeyError" in srv.requests[0].error


def test_chunked_request_body_is_read() -> None:
    payload = json.dumps({"messages": [{"role": "user", "content": "chunky"}]}).encode()

    def pieces() -> Any:
        yield payload[:10]
        yield payload[10:]

    with ScriptedServer(echo) as srv, httpx.Client() as c:
        r = c.post(f"{srv.url}/chat/completions", content=pieces())
        assert r.json()["choices"][0]["message"]["content"] == "echo: chunky"
        assert srv.requests[0].headers.get("transfer-encoding") == "chunked"
        again = c.post(
            f"{srv.url}/chat/completions", json={"messages": MESSAGES}
        )  # same keep-alive connection
        assert again.json()["choices"][0]["message"]["content"] == "echo: say hello"


# -- faults ------------------------------------------------------------------------------


def test_status_fault_with_retry_after() -> None:
    faults = {0: Fault.status(429, retry_after=0.05), 1: Fault.status(503, message="overloaded"), 2: None}
    with ScriptedServer(echo, faults=lambda r: faults[r.index]) as srv:
        r = chat(srv.url)
        assert r.status_code == 429 and r.headers["retry-after"] == "0.05"
        err = r.json()["error"]
        assert set(err) == {"message", "type", "code"} and err["type"] == "rate_limit_error"
        r = chat(srv.url)
        assert r.status_code == 503 and "retry-after" not in r.headers
        assert r.json()["error"]["message"] == "overloaded"
        assert chat(srv.url).status_code == 200
        log = srv.requests
        assert [q.fault for q in log] == ["429", "503", None]
        assert [q.status for q in log] == [429, 503, 200]
        assert all(q.error is None for q in log)
        assert srv.served == 1


def test_status_fault_through_openai_client() -> None:
    with ScriptedServer(echo, faults=lambda r: Fault.status(429, retry_after=1)) as srv:
        with pytest.raises(openai.RateLimitError) as info:
            client(srv).chat.completions.create(model="m", messages=MESSAGES)
        assert info.value.response.headers["retry-after"] == "1"


def test_invalid_json_empty_choices_empty_content_faults() -> None:
    kinds = [Fault.invalid_json(), Fault.empty_choices(), Fault.empty_content()]
    with ScriptedServer(echo, faults=lambda r: kinds[r.index]) as srv:
        r = chat(srv.url)
        assert r.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            r.json()
        body = chat(srv.url).json()
        assert body["choices"] == [] and body["object"] == "chat.completion"
        body = chat(srv.url).json()
        assert body["choices"][0]["message"]["content"] == ""
        assert [q.fault for q in srv.requests] == ["invalid_json", "empty_choices", "empty_content"]
        assert srv.served == 0  # degenerate answers are not successful completions


def test_disconnect_fault_closes_without_response() -> None:
    with ScriptedServer(echo, faults=lambda r: Fault.disconnect() if r.index == 0 else None) as srv:
        with pytest.raises(httpx.RemoteProtocolError):
            chat(srv.url)
        assert chat(srv.url).status_code == 200  # the server carries on
        first = srv.requests[0]
        assert first.fault == "disconnect" and first.status is None and first.t_replied is not None


def test_stall_fault_times_out_client_then_replies_normally() -> None:
    stalls = {0: Fault.stall(0.5), 1: Fault.stall(0.05)}
    with ScriptedServer(echo, faults=lambda r: stalls.get(r.index)) as srv:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{srv.url}/chat/completions", json={"messages": MESSAGES}, timeout=0.15)
        t0 = time.monotonic()
        assert chat(srv.url).json()["choices"][0]["message"]["content"] == "echo: say hello"
        assert time.monotonic() - t0 >= 0.05
        assert srv.requests[1].fault == "stall"


def test_random_faults_is_deterministic_and_hits_the_rate() -> None:
    def draw(fn: Any, n: int) -> list[str | None]:
        out = []
        for i in range(n):
            fault = fn(ScriptedRequest(index=i, path="/v1/chat/completions"))
            out.append(fault.label if fault else None)
        return out

    a = draw(random_faults(0.2, seed=7), 2000)
    assert a == draw(random_faults(0.2, seed=7), 2000)
    assert a != draw(random_faults(0.2, seed=8), 2000)
    counts = Counter(x for x in a if x is not None)
    assert 0.16 < sum(counts.values()) / 2000 < 0.24
    assert set(counts) == {"429", "500", "stall", "invalid_json", "empty_choices"}
    assert draw(random_faults(0.0), 200) == [None] * 200
    assert set(draw(random_faults(1.0, kinds=("disconnect",)), 50)) == {"disconnect"}
    fn = random_faults(1.0, kinds=("429", "stall"), stall_s=0.3, retry_after=0.5)
    faults = [fn(ScriptedRequest(index=i, path="")) for i in range(20)]
    assert {(f.retry_after, f.seconds) for f in faults if f} == {(0.5, 0.0), (None, 0.3)}
    with pytest.raises(ValueError):
        random_faults(0.1, kinds=("bogus",))


def test_random_faults_on_the_server_match_the_function() -> None:
    fn = random_faults(0.5, seed=3, kinds=("500", "empty_choices"))
    with ScriptedServer(echo, faults=fn) as srv:
        statuses = [chat(srv.url).status_code for _ in range(20)]
        expected = [fn(ScriptedRequest(index=i, path="")) for i in range(20)]
        assert [q.fault for q in srv.requests] == [f.label if f else None for f in expected]
        assert statuses.count(500) == sum(1 for f in expected if f and f.kind == "status")
        assert srv.served == sum(1 for f in expected if f is None)


# -- latency and concurrency -------------------------------------------------------------


def test_64_concurrent_requests_overlap_their_latency() -> None:
    with ScriptedServer(echo, latency=0.1) as srv:
        oa = client(srv)

        def one(i: int) -> str:
            msgs: list[Any] = [{"role": "user", "content": f"q{i}"}]
            resp = oa.chat.completions.create(model="m", messages=msgs)
            return resp.choices[0].message.content or ""

        with ThreadPoolExecutor(64) as pool:
            barrier_start = time.monotonic()
            results = list(pool.map(one, range(64)))
            elapsed = time.monotonic() - barrier_start
        assert results == [f"echo: q{i}" for i in range(64)]
        assert srv.served == 64
        assert 0.1 <= elapsed < 1.0, elapsed


def test_latency_callable_per_request() -> None:
    with ScriptedServer(echo, latency=lambda r: 0.2 if r.index == 0 else 0.0) as srv:
        t0 = time.monotonic()
        chat(srv.url)
        slow = time.monotonic() - t0
        t0 = time.monotonic()
        chat(srv.url)
        fast = time.monotonic() - t0
        assert slow >= 0.2 and fast < 0.15
        first = srv.requests[0]
        assert first.t_replied is not None and first.t_replied - first.t_received >= 0.2


def test_stop_is_prompt_even_with_a_stalled_request() -> None:
    srv = ScriptedServer(echo, faults=lambda r: Fault.stall(30)).start()
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            chat(srv.url)
        except httpx.HTTPError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    deadline = time.monotonic() + 2
    while not srv.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    t0 = time.monotonic()
    srv.stop()
    assert time.monotonic() - t0 < 1.0
    worker.join(timeout=2)
    assert not worker.is_alive()
    assert len(outcome) == 1  # the stalled client saw the connection drop
    assert "stopped" in repr(srv)


# -- the Anthropic Messages API ----------------------------------------------------------


def test_anthropic_messages_shape_and_usage() -> None:
    seen: list[list[dict[str, Any]]] = []

    def policy(messages: list[dict[str, Any]], request: ScriptedRequest) -> Reply:
        seen.append(messages)
        return Reply("bonjour", input_tokens=50, output_tokens=3, cached_tokens=10)

    with ScriptedServer(policy) as srv:
        payload = {
            "model": "claude-test",
            "max_tokens": 100,
            "system": [{"type": "text", "text": "you are terse"}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        }
        r = httpx.post(f"{srv.base_url}/v1/messages", json=payload)
        body = r.json()
        assert r.status_code == 200
        assert body["type"] == "message" and body["role"] == "assistant" and body["model"] == "claude-test"
        assert body["content"] == [{"type": "text", "text": "bonjour"}]
        assert body["stop_reason"] == "end_turn" and body["id"]
        assert body["usage"] == {
            "input_tokens": 40,
            "output_tokens": 3,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 10,
        }
        assert seen == [[{"role": "system", "content": "you are terse"}, {"role": "user", "content": "hi"}]]
        assert srv.requests[0].api == "anthropic" and srv.requests[0].path == "/v1/messages"
        assert srv.usage_served == {"input_tokens": 50, "output_tokens": 3}


def test_anthropic_streaming_and_error_shape() -> None:
    faults = lambda r: Fault.status(529) if r.index == 1 else None  # noqa: E731
    with ScriptedServer(lambda m, r: "a streamed anthropic reply", faults=faults) as srv:
        payload = {
            "model": "c",
            "system": "sys",
            "messages": [{"role": "user", "content": "x"}],
            "stream": True,
        }
        with httpx.stream("POST", f"{srv.base_url}/v1/messages", json=payload) as r:
            events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
        types = [e["type"] for e in events]
        assert types[0] == "message_start" and types[-1] == "message_stop"
        text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
        assert text == "a streamed anthropic reply"
        r = httpx.post(f"{srv.base_url}/v1/messages", json={**payload, "stream": False})
        assert r.status_code == 529
        assert r.json() == {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "scripted fault: HTTP 529"},
        }


# -- the request log and auth ------------------------------------------------------------


def test_request_log_records_body_messages_status_and_reset() -> None:
    with ScriptedServer(echo) as srv:
        chat(srv.url, temperature=0.5)
        chat(srv.url, [{"role": "user", "content": "again"}])
        log = srv.requests
        assert [q.index for q in log] == [0, 1]
        first = log[0]
        assert first.body["temperature"] == 0.5 and first.body["messages"] == MESSAGES
        assert first.messages == MESSAGES and first.model == "m" and first.api == "openai"
        assert first.path == "/v1/chat/completions" and first.status == 200
        assert first.reply_text == "echo: say hello" and first.fault is None and first.error is None
        assert first.headers["content-type"] == "application/json"
        assert first.t_replied is not None and first.t_replied >= first.t_received
        log[0].status = 999  # a snapshot: editing it does not touch the server's log
        assert srv.requests[0].status == 200
        assert "requests=2" in repr(srv) and "served=2" in repr(srv)
        srv.reset()
        assert srv.requests == [] and srv.served == 0
        assert srv.usage_served == {"input_tokens": 0, "output_tokens": 0}
        chat(srv.url)
        assert srv.requests[0].index == 0


def test_auth_token_enforced() -> None:
    with ScriptedServer(echo, auth_token="sekret") as srv:
        with pytest.raises(openai.AuthenticationError):
            client(srv, api_key="wrong").chat.completions.create(model="m", messages=MESSAGES)
        resp = client(srv, api_key="sekret").chat.completions.create(model="m", messages=MESSAGES)
        assert resp.choices[0].message.content == "echo: say hello"
        assert httpx.get(f"{srv.url}/models").status_code == 401
        assert httpx.get(f"{srv.url}/models", headers={"Authorization": "Bearer sekret"}).status_code == 200
        payload = {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
        url = f"{srv.base_url}/v1/messages"
        assert httpx.post(url, json=payload).status_code == 401
        assert httpx.post(url, json=payload, headers={"x-api-key": "sekret"}).status_code == 200
        assert (
            httpx.post(
                f"{srv.url}/chat/completions", json=payload, headers={"x-api-key": "sekret"}
            ).status_code
            == 401
        )
        assert [q.status for q in srv.requests] == [401, 200, 401, 200, 401]
        assert srv.served == 2


# -- what a call is for: the x-rlmx-* headers, and ScriptedModel ------------------------------------


def test_request_reads_purpose_depth_and_iteration_from_the_rlmx_headers() -> None:
    with ScriptedServer(echo) as srv:
        chat(srv.url)  # another client: nothing said
        headers = {"x-rlmx-purpose": "child_root", "x-rlmx-depth": "1", "x-rlmx-iteration": "3"}
        httpx.post(f"{srv.url}/chat/completions", json={"model": "m", "messages": MESSAGES}, headers=headers)
        headers = {"x-rlmx-purpose": "llm_query", "x-rlmx-depth": "deep", "x-rlmx-iteration": ""}
        httpx.post(f"{srv.url}/chat/completions", json={"model": "m", "messages": MESSAGES}, headers=headers)
        log = srv.requests
    assert [(r.purpose, r.depth, r.iteration) for r in log] == [
        (None, None, None),
        ("child_root", 1, 3),
        ("llm_query", None, None),  # an unreadable number is None, not a guess
    ]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_same_script_sees_the_same_calls_over_http_as_in_process(provider: str) -> None:
    fence = "`" * 3

    def script() -> ScriptedModel:
        return ScriptedModel(
            root=[f"{fence}repl\nr = rlm_query('child?')\n{fence}", "FINAL_VAR(r)"],
            child=[f"{fence}repl\nx = llm_query('leaf?')\n{fence}", "FINAL_VAR(x)"],
            sub="leaf answer",
        )

    in_process = script()
    local = RLM(in_process.lm(), trace=False, limits=Limits(max_depth=2)).run("q", "ctx")
    over_http = script()
    with ScriptedServer(over_http) as srv:
        url = srv.url if provider == "openai" else srv.base_url
        options = ModelOptions(base_url=url, api_key="k")
        remote = RLM(f"{provider}:scripted", model_options=options, trace=False, limits=Limits(max_depth=2))
        result = remote.run("q", "ctx")
        log = srv.requests
    expected = [
        ("root", 0, 1),
        ("child_root", 1, 1),
        ("llm_query", 2, None),
        ("child_root", 1, 2),
        ("root", 0, 2),
    ]
    assert local.answer == result.answer == "leaf answer"
    assert [(c.purpose, c.depth, c.iteration) for c in in_process.calls] == expected
    assert [(c.purpose, c.depth, c.iteration) for c in over_http.calls] == expected
    assert [(r.purpose, r.depth, r.iteration) for r in log] == expected


def test_scripted_model_plays_its_turns_and_answers_every_purpose() -> None:
    def call(purpose: str | None, depth: int | None = 0, iteration: int | None = None) -> Any:
        return CallSettings(purpose=purpose, depth=depth, iteration=iteration)  # type: ignore[arg-type]

    def count_words(messages: list[dict[str, Any]], info: Any) -> str:
        return f"FINAL({len(messages[-1]['content'].split())} words at depth {info.depth})"

    model = ScriptedModel(root=["first", count_words], sub=lambda prompt: prompt[::-1], final="FINAL(late)")
    said = [{"role": "user", "content": "two words"}]
    assert model(said, call("root", iteration=1)) == "first"
    assert model(said, call("root", iteration=2)) == "FINAL(2 words at depth 0)"
    assert model(said, call("root", iteration=9)) == "FINAL(2 words at depth 0)"  # the last one repeats
    assert model(said, call("correction", iteration=1)) == "first"  # a correction is a root turn
    assert model(said, call("child_root", 1, iteration=1)) == "first"  # no `child`: the root's turns
    assert model(said, call("final", 1, iteration=4)) == "FINAL(late)"
    assert model(said, call("llm_query", 1)) == model(said, call("fallback", 1)) == "sdrow owt"
    assert model(said, call(None, None)) == "sdrow owt"  # a call that does not say: a plain one
    assert model(said, call("compaction", iteration=3)) == model.compaction
    history = [*said, {"role": "assistant", "content": "first"}, {"role": "user", "content": "out"}]
    assert model(history, call("root", iteration=None)) == "FINAL(1 words at depth 0)"  # counted
    assert len(model.calls) == 11 and model.calls[0].prompt == "two words"
    assert model.purposes[:2] == [("root", 0), ("root", 0)] and model.calls[-1].reply.startswith("FINAL(1")
    assert model.reply(said, call("root", iteration=1)) == "first" and len(model.calls) == 11  # unrecorded
    with pytest.raises(ValueError, match="no reply for a call with purpose 'mystery'"):
        model(said, call("mystery"))
    with pytest.raises(ValueError, match="root must be a non-empty sequence"):
        ScriptedModel(root=[])
    with pytest.raises(ValueError, match="root must be a non-empty sequence"):
        ScriptedModel(root="FINAL(1)")
    child = ScriptedModel(root=["root turn"], child=["child turn", "child again"])
    assert child(said, call("child_root", 1, 1)) == "child turn"
    assert child(said, call("child_root", 2, 5)) == "child again"
    assert child(said, call("root", 0, 5)) == "root turn"
