"""The fast paths the benchmarks rely on keep their behaviour: the request a model receives, a large
context's trip to the worker, and a trace that does not grow with the context. No timing here; the
figures live in benchmarks/ (docs/performance.md)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

from policies import is_rlm, repl, turn
from rlmx import RLM, ModelOptions
from rlmx.context.payload import ContextPayload
from rlmx.lm.base import CallSettings
from rlmx.lm.openai_compat import (
    ClientShards,
    OpenAICompatLM,
    _default_client,
)
from rlmx.lm.sampling import Sampling
from rlmx.testing import ScriptedServer


def test_a_model_request_carries_exactly_the_body_and_auth_it_should() -> None:
    with ScriptedServer(lambda m, r: "fine", auth_token="secret") as srv:
        lm = OpenAICompatLM(
            "m1",
            base_url=srv.url,
            api_key="secret",
            extra_body={"top_k": 5},
            sampling=Sampling(temperature=0.2),
        )
        messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
        response = asyncio.run(lm.complete(messages, CallSettings(max_output_tokens=7)))
        (request,) = srv.requests
    assert response.text == "fine" and response.usage.output_tokens == 1
    assert request.status == 200 and request.error is None  # the bearer token was sent
    assert request.body == {
        "model": "m1",
        "messages": messages,
        "max_tokens": 7,
        "temperature": 0.2,
        "top_k": 5,
    }


def test_clients_are_closed_in_their_own_loop() -> None:
    """No connection outlives its event loop: `asyncio.run` closes the client as it ends, `aclose()`
    closes it at once, and the next call opens a fresh one."""
    closed: list[bool] = []

    def factory(lm: OpenAICompatLM) -> Any:
        client = _default_client(lm)
        real_close = client.close

        async def close() -> None:
            await real_close()
            closed.append(client.is_closed())

        client.close = close  # type: ignore[method-assign]
        return client

    with ScriptedServer(lambda m, r: "fine") as srv:
        lm = OpenAICompatLM("m", base_url=srv.url, client_factory=factory)
        messages = [{"role": "user", "content": "q"}]

        async def twice() -> list[str]:
            first = await lm.complete(messages, CallSettings())
            await lm.aclose()
            second = await lm.complete(messages, CallSettings())
            return [first.text, second.text]

        assert asyncio.run(twice()) == ["fine", "fine"]
        assert closed == [True, True]  # aclose() closed the first; the loop's end closed the second
        assert asyncio.run(lm.complete(messages, CallSettings())).text == "fine"  # a new loop, a new client
        assert closed == [True, True, True]


def context_probe(messages: list[dict[str, Any]], request: Any) -> str:
    if not is_rlm(request):
        return "sub"
    if turn(messages) < 3:
        return repl("import hashlib\nprint(len(context), hashlib.sha256(context.encode()).hexdigest())")
    return "FINAL(done)"


def test_a_large_context_reaches_the_worker_whole_and_the_trace_stays_small(tmp_path: Path) -> None:
    line = "2024-05-01 | 00042 | ünïcode and ascii, over several 1 MB slices of the frame\n"
    context = line * (3_500_000 // len(line))  # ~3.5 MB: several slices, multi-byte characters among them
    trace = tmp_path / "t.jsonl"
    with ScriptedServer(context_probe) as srv:
        rlm = RLM("openai:scripted", model_options=ModelOptions(base_url=srv.url), trace=trace)
        result = rlm.run("How long is the context?", context)
    assert result.stopped_by == "final" and result.iterations == 4
    outputs = [
        json.loads(r)["output"]["text"] for r in trace.read_text().splitlines() if '"type": "exec"' in r
    ]
    expected = f"{len(context)} {hashlib.sha256(context.encode()).hexdigest()}"
    assert len(outputs) == 3 and all(o.strip() == expected for o in outputs)
    assert trace.stat().st_size < 60_000  # the context (3.5 MB) is never written into the trace


def test_concurrency_default_allows_the_fan_out_target() -> None:
    assert ModelOptions().concurrency == 64
    assert OpenAICompatLM("m", base_url="http://127.0.0.1:9/v1").concurrency == 64


def test_a_text_payload_keeps_the_callers_string_and_sends_its_exact_utf8_in_slices() -> None:
    for text in ("plain ascii " * 1000, "ünïcode € and 🙂 emoji " * 1000):
        payload = ContextPayload.of(text)
        assert payload.text is text and payload.blob == b""  # no encoded copy held in the host
        pieces = list(payload.pieces(chunk=777))  # slices cut through multi-byte characters' text
        assert len(pieces) > 1 and b"".join(pieces) == text.encode("utf-8")
        assert payload.size() == len(text.encode("utf-8")) and payload.data() == text.encode("utf-8")
    as_json = ContextPayload.of({"a": [1, "é"]})
    assert b"".join(as_json.pieces(chunk=3)) == as_json.blob == as_json.data()
    assert as_json.size() == len(as_json.blob)


def test_a_batch_keeps_its_order_and_never_has_more_than_its_window_under_way() -> None:
    from rlmx.engine.subcalls import run_bounded

    live, peak, started = [0], [0], []

    def call(i: int) -> Any:
        async def run() -> str:
            started.append(i)
            live[0] += 1
            peak[0] = max(peak[0], live[0])
            await asyncio.sleep(0.001 * (i % 3))
            live[0] -= 1
            return f"r{i}"

        return run

    results = asyncio.run(run_bounded([call(i) for i in range(50)], 8))
    assert results == [f"r{i}" for i in range(50)] and peak[0] == 8
    assert started[:8] == list(range(8))  # taken in order

    async def failing() -> list[str]:
        cancelled: list[int] = []

        def slow(i: int) -> Any:
            async def run() -> str:
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    cancelled.append(i)
                    raise
                return "never"

            return run

        async def boom() -> str:
            raise ValueError("broken")

        try:
            await run_bounded([slow(0), slow(1), boom, slow(3)], 3)
        except ValueError:
            await asyncio.sleep(0)
            return sorted(map(str, cancelled))
        return ["no error"]

    assert asyncio.run(failing()) == ["0", "1"]  # the error propagates; the others are cancelled


def test_one_model_serves_runs_in_several_threads_each_loop_with_its_own_client() -> None:
    import threading

    made: list[Any] = []

    def factory(lm: OpenAICompatLM) -> Any:
        client = _default_client(lm)
        made.append(client)
        return client

    def slow(messages: list[dict[str, Any]], request: Any) -> str:
        return "fine"

    with ScriptedServer(slow, latency=0.2) as srv:
        lm = OpenAICompatLM("m", base_url=srv.url, client_factory=factory)
        messages = [{"role": "user", "content": "q"}]
        answers: list[str] = []

        def run_one() -> None:
            async def two() -> list[str]:  # two calls on this loop: one client for both
                replies = await asyncio.gather(*(lm.complete(messages, CallSettings()) for _ in range(2)))
                return [r.text for r in replies]

            answers.extend(asyncio.run(two()))

        threads = [threading.Thread(target=run_one) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert answers == ["fine"] * 6
    assert len(made) == 3 and all(c.is_closed() for c in made)  # one per loop, each closed as it ended


def test_rlm_aclose_closes_the_clients_of_a_loop_the_caller_manages() -> None:
    made: list[Any] = []

    def factory(lm: OpenAICompatLM) -> Any:
        made.append(_default_client(lm))
        return made[-1]

    with ScriptedServer(lambda m, r: "FINAL(ok)") as srv:
        rlm = RLM(OpenAICompatLM("m", base_url=srv.url, client_factory=factory), trace=False)

        async def run_and_close() -> Any:
            result = await rlm.arun("q", "ctx")
            assert made and not made[0].is_closed()  # still open: a next run on this loop reuses it
            await rlm.aclose()
            return result.answer

        loop = asyncio.new_event_loop()  # no asyncio.run: nothing closes the client but aclose()
        try:
            assert loop.run_until_complete(run_and_close()) == "ok"
        finally:
            loop.close()
    assert len(made) == 1 and made[0].is_closed()


def test_calls_spread_over_small_client_pools_and_one_at_a_time_stay_on_one() -> None:
    """At most 16 calls per SDK client (its pool's cost per request grows with its connections), at
    most ⌈concurrency / 16⌉ clients, each made only when the others are full, and a call made alone
    always goes to the first (warm) one."""
    made: list[Any] = []

    def factory(lm: OpenAICompatLM) -> Any:
        made.append(object())
        return made[-1]

    lm = OpenAICompatLM("m", base_url="http://127.0.0.1:9/v1", client_factory=factory)

    async def scenario() -> tuple[list[int], list[int], int, int]:
        shards = ClientShards(lm, concurrency=40)  # room for 3 clients
        taken = [shards.take() for _ in range(48)]
        full = list(shards.busy)
        beyond = shards.take()  # no fourth client: the least busy (the first on a tie) takes it
        for index in [*taken, beyond]:
            shards.give_back(index)
        return taken, full, beyond, shards.take()

    taken, full, beyond, alone = asyncio.run(scenario())
    assert taken == [0] * 16 + [1] * 16 + [2] * 16 and full == [16, 16, 16]
    assert len(made) == 3 and beyond == 0
    assert alone == 0  # idle again: a call alone goes to the first client


def test_a_wide_batch_stays_within_its_clients_and_all_are_closed() -> None:
    made: list[Any] = []

    def factory(lm: OpenAICompatLM) -> Any:
        made.append(_default_client(lm))
        return made[-1]

    with ScriptedServer(lambda m, r: "fine", latency=0.3) as srv:
        lm = OpenAICompatLM("m", base_url=srv.url, concurrency=64, client_factory=factory)
        messages = [{"role": "user", "content": "q"}]

        async def batch() -> list[str]:
            replies = await asyncio.gather(*(lm.complete(messages, CallSettings()) for _ in range(40)))
            return [r.text for r in replies]

        assert asyncio.run(batch()) == ["fine"] * 40
    assert 1 <= len(made) <= 4 and all(c.is_closed() for c in made)
