"""The opt-in SQLite response cache: a hit is neither a call nor a cost, and the trace marks it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from examples.support_tickets.generate import QUESTION, generate

from policies import tickets_policy
from rlmx import RLM, CallSettings, ModelOptions
from rlmx.lm.cache import CachedLM, ResponseCache
from rlmx.lm.registry import resolve_model
from rlmx.lm.retry import RetryPolicy
from rlmx.testing import Fault, ScriptedServer


def lm_calls(path: str | None) -> list[dict[str, Any]]:
    assert path is not None
    return [r for r in map(json.loads, Path(path).read_text().splitlines()) if r["type"] == "lm_call"]


def test_a_second_identical_run_is_answered_from_the_cache_without_calls_or_cost(tmp_path: Path) -> None:
    text, gold, _ = generate(seed=4)
    cache_file = tmp_path / "responses.sqlite"
    with ScriptedServer(tickets_policy) as srv:
        options = ModelOptions(base_url=srv.url)
        first = RLM("openai:scripted", model_options=options, cache=cache_file).run(QUESTION, text)
        made = len(srv.requests)
        second = RLM("openai:scripted", model_options=options, cache=cache_file).run(QUESTION, text)
        assert len(srv.requests) == made  # not one request more
        requests = srv.requests
    assert first.answer == second.answer == gold
    assert first.usage["calls"] == made and first.usage["input_tokens"] > 0
    assert second.usage["calls"] == 0
    assert second.usage["input_tokens"] == second.usage["output_tokens"] == 0
    hits = lm_calls(second.trace_path)
    assert len(hits) == made
    assert all(c["cache_hit"] and not c["counted"] and c["attempts"] == 0 for c in hits)
    assert not any(c["cache_hit"] for c in lm_calls(first.trace_path))
    distinct = {json.dumps(r.messages) for r in requests}  # identical sub-call prompts share an entry
    assert len(ResponseCache(cache_file)) == len(distinct) < made


def test_the_key_covers_model_endpoint_messages_and_parameters(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    msgs = [{"role": "user", "content": "hello"}]
    with ScriptedServer(lambda m, r: f"reply {r.index}") as one, ScriptedServer(lambda m, r: "other") as two:

        def ask(
            srv: ScriptedServer,
            model: str,
            messages: list[dict[str, Any]],
            temperature: float | None = None,
            **settings: Any,
        ) -> Any:
            lm = CachedLM(
                resolve_model(model, ModelOptions(base_url=srv.url, temperature=temperature)), cache
            )
            return asyncio.run(lm.complete(messages, CallSettings(**settings)))

        assert ask(one, "openai:a", msgs).text == "reply 0"
        assert ask(one, "openai:a", msgs).cached  # same everything: a hit
        assert ask(one, "openai:b", msgs).text == "reply 1"  # another model
        assert ask(one, "openai:a", msgs, max_output_tokens=5).text == "reply 2"  # another parameter
        assert ask(one, "openai:a", msgs, temperature=0.5).text == "reply 3"
        assert ask(one, "openai:a", [{"role": "user", "content": "hello!"}]).text == "reply 4"
        assert ask(one, "vllm:a", msgs).text == "reply 5"  # another provider
        assert ask(two, "openai:a", msgs).text == "other"  # another endpoint
        assert len(one.requests) == 6 and len(two.requests) == 1
    assert cache.hits == 1 and len(cache) == 7


def test_failed_calls_are_not_cached(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    fail = {"on": True}
    with ScriptedServer(
        lambda m, r: "good", faults=lambda r: Fault.status(500) if fail["on"] else None
    ) as srv:
        options = ModelOptions(base_url=srv.url, retry=RetryPolicy(max_attempts=2, base_delay_s=0.0))
        lm = CachedLM(resolve_model("openai:x", options), cache)
        msgs = [{"role": "user", "content": "q"}]
        try:
            asyncio.run(lm.complete(msgs, CallSettings()))
        except Exception as exc:
            assert "failed after 2 attempts" in str(exc)
        else:
            raise AssertionError("the call should have failed")
        assert len(cache) == 0
        fail["on"] = False
        assert asyncio.run(lm.complete(msgs, CallSettings())).text == "good"
    assert len(cache) == 1


def rlmx(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlmx.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=120,
    )


def test_cli_cache_flag_and_config_section(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    with ScriptedServer(lambda m, r: "FINAL(cached answer)") as srv:
        args = ("ask", "q", "--model", "openai:scripted", "--base-url", srv.url, "--json", "--no-trace")
        first = rlmx(*args, "--cache", cwd=tmp_path, env=env)
        second = rlmx(*args, "--cache", cwd=tmp_path, env=env)
        assert len(srv.requests) == 1
        third = rlmx(*args, cwd=tmp_path, env=env)  # without --cache: a real call
        assert len(srv.requests) == 2
        (tmp_path / "rlmx.toml").write_text(f'[cache]\nenabled = true\npath = "{tmp_path / "cfg.sqlite"}"\n')
        rlmx(*args, cwd=tmp_path, env=env)
        fourth = rlmx(*args, cwd=tmp_path, env=env)
        assert len(srv.requests) == 3
    outs = [json.loads(p.stdout) for p in (first, second, third, fourth)]
    assert [o["answer"] for o in outs] == ["cached answer"] * 4
    assert [o["usage"]["calls"] for o in outs] == [1, 0, 1, 0]
    assert (tmp_path / "cache" / "rlmx" / "responses.sqlite").is_file()
    assert (tmp_path / "cfg.sqlite").is_file()
