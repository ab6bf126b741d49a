"""Prices: genai-prices for known models, overrides for the rest, provider-reported cost first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import genai_prices
import pytest

from observability_runs import SCRIPTED, SCRIPTED_PRICE, depth2_policy, input_tokens_of, output_tokens_of
from policies import is_sub
from rlmx import RLM, ConfigError, LMResponse, ModelOptions, Usage
from rlmx.lm.anthropic import anthropic_usage
from rlmx.pricing import Price, Pricing, parse_price_spec, price_from_config
from rlmx.testing import FunctionLM, Reply, ScriptedServer

MILLION = 1_000_000


def catalog(model: str, provider: str, usage: Usage) -> float:
    request = genai_prices.Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cached_tokens,
    )
    return float(genai_prices.calc_price(request, model, provider_id=provider).total_price)


def test_provider_model_names_map_to_the_genai_prices_catalog() -> None:
    pricing = Pricing()
    usage = Usage(input_tokens=120_000, output_tokens=3_000)
    for name, provider, model in [
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini"),
        ("anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
        ("gemini:gemini-2.5-flash", "google", "gemini-2.5-flash"),
        ("openrouter:anthropic/claude-sonnet-4.5", "openrouter", "anthropic/claude-sonnet-4.5"),
    ]:
        cost = pricing(name, usage)
        assert cost is not None and cost > 0, name
        assert cost == pytest.approx(catalog(model, provider, usage)), name
    # the published gpt-4o-mini price, USD 0.15 / 0.60 per million tokens
    assert pricing("openai:gpt-4o-mini", Usage(MILLION, MILLION)) == pytest.approx(0.75)


def test_cached_input_is_billed_at_the_cache_price_and_tiers_apply() -> None:
    pricing = Pricing()
    full = pricing("openai:gpt-4o-mini", Usage(input_tokens=MILLION))
    half_cached = pricing("openai:gpt-4o-mini", Usage(input_tokens=MILLION, cached_tokens=MILLION // 2))
    assert full is not None and half_cached is not None and half_cached < full
    # Claude's long-context tier: a token costs more past 200k input tokens
    short = pricing("anthropic:claude-sonnet-4-5", Usage(input_tokens=100_000))
    long = pricing("anthropic:claude-sonnet-4-5", Usage(input_tokens=300_000))
    assert short is not None and long is not None and long / 300_000 > short / 100_000


def test_anthropic_cache_writes_are_billed_at_the_cache_write_price() -> None:
    # what the Messages API reports: fresh, cache-read and cache-written input apart
    raw = SimpleNamespace(
        input_tokens=10_000,
        cache_read_input_tokens=50_000,
        cache_creation_input_tokens=40_000,
        output_tokens=1_000,
    )
    usage = anthropic_usage(raw)
    assert (usage.input_tokens, usage.cached_tokens, usage.cache_write_tokens) == (100_000, 50_000, 40_000)
    # the published claude-sonnet-4-5 prices (<= 200k input): USD 3 input, 0.30 cache read,
    # 3.75 cache write (5-minute), 15 output per million tokens
    expected = (10_000 * 3.0 + 50_000 * 0.30 + 40_000 * 3.75 + 1_000 * 15.0) / MILLION
    lm = FunctionLM(
        lambda messages, settings: LMResponse("FINAL(ok)", usage=usage), name="anthropic:claude-sonnet-4-5"
    )
    result = RLM(lm, trace=False).run("q", "ctx")  # the default pricer: the genai-prices catalog
    assert result.usage["cost_usd"] == pytest.approx(expected)
    pricing = Pricing()
    as_fresh_input = pricing("anthropic:claude-sonnet-4-5", replace(usage, cache_write_tokens=0))
    assert as_fresh_input == pytest.approx(expected - 40_000 * 0.75 / MILLION)
    # a model without a cache-write price in the catalog bills written tokens as plain input
    written = pricing("openai:gpt-4o-mini", Usage(input_tokens=MILLION, cache_write_tokens=MILLION))
    assert written == pytest.approx(0.15)


def test_unknown_models_have_no_price_and_local_models_are_free() -> None:
    pricing = Pricing()
    assert pricing("openai:no-such-model-xyz", Usage(1000, 1000)) is None
    assert pricing("vllm:meta-llama/Llama-3-8B", Usage(1000, 1000)) is None
    assert pricing("ollama:llama3", Usage(1000, 1000)) == 0.0
    assert pricing.source("openai:gpt-4o-mini") == "genai-prices" and pricing.source("vllm:x") is None


def test_an_override_wins_over_the_catalog_by_full_or_bare_name() -> None:
    price = Price(input_per_mtok=1.0, output_per_mtok=2.0, cached_input_per_mtok=0.5)
    usage = Usage(input_tokens=400_000, output_tokens=100_000, cached_tokens=100_000)
    expected = (300_000 * 1.0 + 100_000 * 0.5 + 100_000 * 2.0) / MILLION
    assert Pricing({"openai:gpt-4o-mini": price})("openai:gpt-4o-mini", usage) == pytest.approx(expected)
    assert Pricing({"my-model": price})("vllm:my-model", usage) == pytest.approx(expected)
    no_cache_price = Price(1.0, 2.0)  # cached tokens then cost the full input price
    assert no_cache_price.cost(usage) == pytest.approx((400_000 * 1.0 + 100_000 * 2.0) / MILLION)


def test_price_specs_and_config_entries_parse_or_fail_with_one_clear_line() -> None:
    assert parse_price_spec("openai:my-ft=0.3,1.2") == ("openai:my-ft", Price(0.3, 1.2))
    assert parse_price_spec("vllm:org/m=1,2,0.1") == ("vllm:org/m", Price(1.0, 2.0, 0.1))
    for bad in ("openai:x", "openai:x=1", "=1,2", "openai:x=a,b", "openai:x=-1,2"):
        with pytest.raises(ConfigError, match="price"):
            parse_price_spec(bad)
    assert price_from_config([0.3, 1.2], "m") == Price(0.3, 1.2)
    assert price_from_config({"input": 1, "output": 2, "cached_input": 0.1}, "m") == Price(1, 2, 0.1)
    with pytest.raises(ConfigError, match="bad price for 'm'"):
        price_from_config("cheap", "m")


def test_provider_reported_cost_is_used_instead_of_a_price(tmp_path: Path) -> None:
    reported = 0.0123

    def policy(messages: list[dict[str, Any]], request: Any) -> Reply:
        return Reply(depth2_policy(messages, request).text, cost=reported)

    with ScriptedServer(policy) as srv:
        result = RLM(
            SCRIPTED,
            model_options=ModelOptions(base_url=srv.url),
            pricer=Pricing({SCRIPTED: SCRIPTED_PRICE}),
            trace=tmp_path / "t.jsonl",
        ).run("q", "ctx")
        n = srv.served
    assert result.usage["cost_usd"] == pytest.approx(reported * n)
    records = [json.loads(line) for line in Path(result.trace_path or "").read_text().splitlines()]
    sources = {r["cost_source"] for r in records if r["type"] == "lm_call"}
    assert sources == {"provider"}


def test_cached_and_reasoning_tokens_are_counted_and_priced() -> None:
    usage = Usage(input_tokens=10_000, output_tokens=2_000, cached_tokens=6_000, reasoning_tokens=1_500)
    lm = FunctionLM(lambda messages, settings: LMResponse("FINAL(ok)", usage=usage), name="openai:reasoner")
    price = Price(input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.5)
    result = RLM(lm, pricer=Pricing({"openai:reasoner": price}), trace=False).run("q", "ctx")
    assert result.usage["cached_tokens"] == 6_000 and result.usage["reasoning_tokens"] == 1_500
    # output_tokens include the reasoning tokens (the OpenAI convention), billed at the output price
    expected = (4_000 * 2.0 + 6_000 * 0.5 + 2_000 * 8.0) / MILLION
    assert result.usage["cost_usd"] == pytest.approx(expected)
    assert result.usage["by_depth"]["0"]["cached_tokens"] == 6_000


def test_cached_tokens_reported_by_the_server_reach_the_usage(tmp_path: Path) -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> Reply:
        tokens = input_tokens_of(messages)
        return Reply("FINAL(ok)", input_tokens=tokens, output_tokens=7, cached_tokens=tokens // 2)

    with ScriptedServer(policy) as srv:
        result = RLM(
            SCRIPTED, model_options=ModelOptions(base_url=srv.url), pricer=Pricing({SCRIPTED: SCRIPTED_PRICE})
        ).run("q", "ctx")
        (request,) = srv.requests
    tokens = input_tokens_of(request.messages)
    assert result.usage["cached_tokens"] == tokens // 2
    expected = SCRIPTED_PRICE.cost(Usage(input_tokens=tokens, output_tokens=7, cached_tokens=tokens // 2))
    assert result.usage["cost_usd"] == pytest.approx(expected)


# --- the CLI ---------------------------------------------------------------------------------------------
def rlmx(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlmx.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=120,
    )


def test_cli_refuses_a_budget_it_cannot_enforce_and_runs_when_told_or_priced(tmp_path: Path) -> None:
    with ScriptedServer(depth2_policy) as srv:
        base = ["ask", "What do the children find?", "--model", SCRIPTED, "--base-url", srv.url]
        base += [
            "--max-depth",
            "2",
            "--no-trace",
            "--json",
            "--max-cost-usd",
            "50",
            "--max-output-tokens",
            "100",
        ]
        refused = rlmx(*base)
        assert srv.requests == []
        allowed = rlmx(*base, "--allow-unknown-price")
        srv.reset()
        priced = rlmx(*base, "--price", f"{SCRIPTED}=100,400")
        requests = srv.requests
    assert refused.returncode == 2
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .startswith("rlmx: error: --max-cost-usd 50.0 cannot be enforced")
    )
    assert "--price openai:scripted=IN,OUT" in refused.stderr
    assert allowed.returncode == 0, allowed.stderr
    assert "no price is known for openai:scripted" in allowed.stderr
    assert json.loads(allowed.stdout)["usage"]["cost_usd"] is None
    assert priced.returncode == 0, priced.stderr
    expected = sum(
        SCRIPTED_PRICE.cost(Usage(input_tokens_of(r.messages), output_tokens_of(r.body))) for r in requests
    )
    out = json.loads(priced.stdout)
    assert out["usage"]["cost_usd"] == pytest.approx(expected, rel=1e-9)
    assert out["usage"]["calls"] == len(requests) and any(is_sub(r) for r in requests)
    assert set(out["usage"]) >= {"cached_tokens", "by_depth", "wall_time_s"}


def test_cli_rejects_a_malformed_price() -> None:
    proc = rlmx("ask", "q", "--model", SCRIPTED, "--base-url", "http://127.0.0.1:9/v1", "--price", "x=1")
    assert proc.returncode == 2 and "bad price 'x=1'" in proc.stderr
