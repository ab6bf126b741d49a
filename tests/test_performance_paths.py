"""The fast paths the benchmarks rely on keep their behaviour: the request a model receives, a large
context's trip to the worker, and a trace that does not grow with the context. No timing here; the
figures live in benchmarks/ (docs/performance.md)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

from policies import is_root, repl, turn
from rlmx import RLM, ModelOptions
from rlmx.lm.base import CallSettings
from rlmx.lm.openai_compat import OpenAICompatLM, shared_ssl_context
from rlmx.testing import ScriptedServer


def test_a_model_request_carries_exactly_the_body_and_auth_it_should() -> None:
    with ScriptedServer(lambda m, r: "fine", auth_token="secret") as srv:
        lm = OpenAICompatLM("m1", base_url=srv.url, api_key="secret", extra_body={"top_k": 5})
        messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
        response = asyncio.run(lm.complete(messages, CallSettings(max_output_tokens=7, temperature=0.2)))
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


def test_every_client_shares_one_tls_context() -> None:
    a = OpenAICompatLM("a", base_url="http://127.0.0.1:9/v1")
    b = OpenAICompatLM("b", base_url="http://127.0.0.1:9/v1")
    assert shared_ssl_context() is shared_ssl_context()
    assert a._client_factory(a)._client._transport._pool._ssl_context is shared_ssl_context()  # type: ignore[attr-defined]
    assert b._client_factory(b)._client._transport._pool._ssl_context is shared_ssl_context()  # type: ignore[attr-defined]


def context_probe(messages: list[dict[str, Any]], request: Any = None) -> str:
    if not is_root(messages):
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
