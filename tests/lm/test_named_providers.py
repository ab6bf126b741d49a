"""The OpenAI-compatible clouds reached by name (gemini, groq, together, fireworks, deepseek, mistral, xai,
cerebras): the key variable each reads, the request it sends, the usage it books (cached tokens where
the provider reports them), its quirks against recorded replies, `rlmx providers` and the docs table."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policies import is_root
from rlmx import RLM, CallSettings, ModelOptions, resolve_model
from rlmx.commands.providers import markdown_tables, providers_table, quirks_table
from rlmx.errors import ConfigError, ModelError
from rlmx.lm.base import Usage
from rlmx.lm.openai_compat import FORBID_ENV, OpenAICompatLM
from rlmx.lm.providers import BUILT_IN, CLOUDS, ProviderRecord, built_in
from rlmx.lm.retry import RetryPolicy
from rlmx.pricing import Pricing, catalog_id
from rlmx.testing import Fault, Reply, ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
RLMX_ASK = [sys.executable, "-m", "rlmx.cli", "ask", "q", "-c", "-"]
NAMED = ("gemini", "groq", "together", "fireworks", "deepseek", "mistral", "xai", "cerebras")
CHAT_FIELDS = {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p"}
CHAT_FIELDS |= {"reasoning_effort"}

# Each provider's `usage` object as it sends it (the shape its documentation or a recorded reply shows),
# and the Usage rlmx must book from it.
STANDARD = {
    "prompt_tokens": 1200,
    "completion_tokens": 40,
    "total_tokens": 1240,
    "prompt_tokens_details": {"cached_tokens": 1024},
}
BOOKED = Usage(input_tokens=1200, output_tokens=40, cached_tokens=1024)
RECORDED_USAGE: dict[str, tuple[dict[str, Any], Usage]] = {
    # a thinking model: total_tokens counts 283 thinking tokens that completion_tokens leaves out (the
    # reply recorded in openai/openai-python#2544, cache reads added)
    "gemini": (
        {
            "prompt_tokens": 1469,
            "completion_tokens": 744,
            "total_tokens": 2496,
            "prompt_tokens_details": {"cached_tokens": 1024},
        },
        Usage(input_tokens=1469, output_tokens=1027, cached_tokens=1024, reasoning_tokens=283),
    ),
    "groq": (STANDARD, BOOKED),
    "together": (STANDARD, BOOKED),
    "fireworks": (STANDARD, BOOKED),
    # DeepSeek counts cache hits and misses in fields of its own; no prompt_tokens_details
    "deepseek": (
        {
            "prompt_tokens": 1200,
            "completion_tokens": 40,
            "total_tokens": 1240,
            "prompt_cache_hit_tokens": 1024,
            "prompt_cache_miss_tokens": 176,
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
        BOOKED,
    ),
    "mistral": (STANDARD, BOOKED),
    # the shape docs.x.ai shows for the chat API
    "xai": (
        {
            "prompt_tokens": 1200,
            "completion_tokens": 40,
            "total_tokens": 1240,
            "prompt_tokens_details": {
                "text_tokens": 1200,
                "audio_tokens": 0,
                "image_tokens": 0,
                "cached_tokens": 1024,
            },
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        BOOKED,
    ),
    "cerebras": (STANDARD, BOOKED),
}

# Gemini's error replies are a JSON array of error objects (as recorded in n4ze3m/page-assist#406 and
# MinLL/SkyrimNet-GamePlugin#77)
GEMINI_UNKNOWN_FIELD = [
    {
        "error": {
            "code": 400,
            "message": 'Invalid JSON payload received. Unknown name "usage": Cannot find field.',
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [
                        {
                            "description": 'Invalid JSON payload received. Unknown name "usage": Cannot find field.'
                        }
                    ],
                }
            ],
        }
    }
]
GEMINI_EXHAUSTED = [
    {
        "error": {
            "code": 429,
            "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED",
        }
    }
]


def record(name: str) -> ProviderRecord:
    return built_in(name)


def only_key(monkeypatch: pytest.MonkeyPatch, provider: str, variable: str | None, value: str = "") -> None:
    """Unset every key variable of `provider`, then set `variable` (if any) to `value`."""
    for name in record(provider).key_envs:
        monkeypatch.delenv(name, raising=False)
    if variable is not None:
        monkeypatch.setenv(variable, value)


def complete(lm: Any, **settings: Any) -> Any:
    call = CallSettings(purpose="root", depth=0, iteration=1, **settings)
    return asyncio.run(lm.complete([{"role": "user", "content": "hello"}], call))


def test_the_named_clouds_are_records_with_a_catalog_id_genai_prices_knows() -> None:
    import genai_prices.data

    catalog = {provider.id for provider in genai_prices.data.providers}
    assert tuple(r.name for r in CLOUDS) == NAMED
    for cloud in CLOUDS:
        assert cloud.factory == "rlmx.lm.compatible:compatible_model" and cloud.key_required, cloud.name
        assert cloud.base_url and cloud.base_url.startswith("https://") and cloud.key_envs, cloud.name
        assert cloud.price_id in catalog and catalog_id(cloud.name) == cloud.price_id, cloud.name
        assert cloud.help and cloud.example.startswith(f"{cloud.name}:") and cloud.quirks.sources, cloud.name
        # the example model is one genai-prices prices, so a run with it has a cost and a budget works
        cost = Pricing()(cloud.example, Usage(input_tokens=10_000, output_tokens=1_000))
        assert cost is not None and cost > 0, cloud.example
    assert {catalog_id("gemini"), catalog_id("xai")} == {"google", "x-ai"}


@pytest.mark.parametrize("provider", NAMED)
def test_each_named_provider_reads_its_key_sends_the_chat_shape_and_books_its_usage(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    variable = record(provider).key_envs[0]
    only_key(monkeypatch, provider, variable, f"key-for-{provider}")
    raw, booked = RECORDED_USAGE[provider]
    with ScriptedServer(lambda m, r: Reply("hello back", usage=raw), auth_token=f"key-for-{provider}") as srv:
        lm = resolve_model(f"{provider}:some-model", ModelOptions(base_url=srv.url, temperature=0.2))
        response = complete(lm, max_output_tokens=64)
        (request,) = srv.requests
    assert isinstance(lm, OpenAICompatLM) and lm.name == f"{provider}:some-model"
    assert response.text == "hello back" and response.usage == booked
    # the key it read, sent the OpenAI way
    assert request.headers["authorization"] == f"Bearer key-for-{provider}"
    # the request: the chat fields and nothing else (no extra body, nothing rlmx-specific)
    assert request.path == "/v1/chat/completions" and request.model == "some-model"
    assert request.body == {
        "model": "some-model",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 64,
        "temperature": 0.2,
    }
    assert not set(request.body) & set(record(provider).quirks.rejected_params)
    # what the call is for goes in headers, to this loopback server only
    assert request.purpose == "root" and not any("rlmx" in key for key in request.body)


def test_every_body_field_rlmx_can_send_is_a_chat_field_gemini_knows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gemini answers an unknown body field with a 400, so a gemini model never carries extra_body (not
    even on its own endpoint) and every field it may send is one of the chat API's."""
    monkeypatch.delenv(FORBID_ENV)  # building a client only: nothing is sent
    only_key(monkeypatch, "gemini", "GEMINI_API_KEY", "g-key")
    lm = resolve_model("gemini:gemini-2.5-flash")
    assert isinstance(lm, OpenAICompatLM) and lm.extra_body == {}
    assert lm.max_tokens_param in CHAT_FIELDS
    assert record("gemini").quirks.unknown_fields_rejected


def test_gemini_reads_gemini_api_key_then_google_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "http://127.0.0.1:9/v1"  # never called: only the key each model reads is checked
    only_key(monkeypatch, "gemini", "GOOGLE_API_KEY", "from-google")
    lm = resolve_model("gemini:gemini-2.5-flash", ModelOptions(base_url=url))
    assert isinstance(lm, OpenAICompatLM) and lm.api_key == "from-google"
    monkeypatch.setenv("GEMINI_API_KEY", "from-gemini")
    lm = resolve_model("gemini:gemini-2.5-flash", ModelOptions(base_url=url))
    assert isinstance(lm, OpenAICompatLM) and lm.api_key == "from-gemini"
    assert record("gemini").key_from({"GOOGLE_API_KEY": "b", "GEMINI_API_KEY": "a"}) == (
        "GEMINI_API_KEY",
        "a",
    )
    assert record("gemini").key_from({"GEMINI_API_KEY": ""}) is None  # an empty variable is not a key


@pytest.mark.parametrize("provider", NAMED)
def test_a_missing_key_names_the_provider_its_url_and_its_variables(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    only_key(monkeypatch, provider, None)
    with pytest.raises(ConfigError) as caught:
        resolve_model(f"{provider}:some-model")
    message = str(caught.value)
    cloud = record(provider)
    assert f"{provider}:some-model" in message and str(cloud.base_url) in message
    assert all(name in message for name in cloud.key_envs), message
    if provider == "gemini":
        assert "GEMINI_API_KEY or GOOGLE_API_KEY" in message


def test_each_cloud_connects_to_its_documented_url_with_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FORBID_ENV)  # building clients only: nothing is sent anywhere in this test
    for provider in NAMED:
        only_key(monkeypatch, provider, record(provider).key_envs[-1], f"k-{provider}")
        lm = resolve_model(record(provider).example)
        assert isinstance(lm, OpenAICompatLM), provider
        assert (lm.base_url, lm.api_key) == (record(provider).base_url, f"k-{provider}"), provider
        assert lm.model == record(provider).example.split(":", 1)[1]


def test_gemini_error_arrays_a_bad_request_fails_at_once_and_exhaustion_is_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    only_key(monkeypatch, "gemini", "GEMINI_API_KEY", "g-key")
    retry = RetryPolicy(max_attempts=4, base_delay_s=0.01)
    with ScriptedServer(
        lambda m, r: "x", faults=lambda r: Fault.status(400, body=GEMINI_UNKNOWN_FIELD)
    ) as srv:
        lm = resolve_model("gemini:gemini-2.5-flash", ModelOptions(base_url=srv.url, retry=retry))
        with pytest.raises(ModelError) as caught:
            complete(lm)
        assert len(srv.requests) == 1  # a 400 is not retried, array or not
        url = srv.url
    message = str(caught.value)
    assert "gemini:gemini-2.5-flash" in message and url in message and "HTTP 400" in message
    assert "Unknown name" in message  # Google's own words survive the array

    faults = iter([Fault.status(429, retry_after=0.01, body=GEMINI_EXHAUSTED)])
    with ScriptedServer(lambda m, r: "after the quota", faults=lambda r: next(faults, None)) as srv:
        lm = resolve_model("gemini:gemini-2.5-flash", ModelOptions(base_url=srv.url, retry=retry))
        response = complete(lm)
        assert [r.status for r in srv.requests] == [429, 200]
    assert response.text == "after the quota" and response.attempts == 2
    assert "RESOURCE_EXHAUSTED" in response.attempt_errors[0] or "exhausted" in response.attempt_errors[0]


def test_a_run_books_deepseeks_cache_hits_and_prices_them_at_the_cache_price(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    only_key(monkeypatch, "deepseek", "DEEPSEEK_API_KEY", "d-key")
    raw, booked = RECORDED_USAGE["deepseek"]

    def policy(messages: list[dict[str, Any]], request: Any) -> Reply:
        return Reply("FINAL(42)" if is_root(request) else "x", usage=raw)

    with ScriptedServer(policy, auth_token="d-key") as srv:
        result = RLM("deepseek:deepseek-chat", model_options=ModelOptions(base_url=srv.url)).run("q", "ctx")
        served = srv.usage_served
    assert result.answer == "42" and result.usage["calls"] == 1
    assert result.usage["input_tokens"] == served["input_tokens"] == booked.input_tokens
    assert result.usage["output_tokens"] == served["output_tokens"] == booked.output_tokens
    assert result.usage["cached_tokens"] == booked.cached_tokens
    full = Pricing()("deepseek:deepseek-chat", Usage(input_tokens=1200, output_tokens=40))
    assert result.usage["cost_usd"] == pytest.approx(Pricing()("deepseek:deepseek-chat", booked))
    assert full is not None and result.usage["cost_usd"] < full  # cache hits are billed lower


def test_base_url_overrides_a_named_provider_from_the_command_line(tmp_path: Path) -> None:
    with ScriptedServer(lambda m, r: "FINAL(from groq)" if is_root(r) else "x", auth_token="gk") as srv:
        proc = subprocess.run(
            [*RLMX_ASK, "--model", "groq:scripted", "--base-url", srv.url, "--quiet", "--no-trace"],
            input="some text",
            capture_output=True,
            text=True,
            env={**os.environ, "GROQ_API_KEY": "gk"},
            timeout=120,
        )
        (request,) = srv.requests
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "from groq" and request.headers["authorization"] == "Bearer gk"


def rlmx_providers(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not any(k in r.key_envs for r in BUILT_IN)}
    return subprocess.run(
        [sys.executable, "-m", "rlmx.cli", "providers", *args],
        capture_output=True,
        text=True,
        env={**clean, "XDG_CONFIG_HOME": env.pop("XDG_CONFIG_HOME"), **env},
        timeout=60,
    )


def test_rlmx_providers_lists_every_provider_and_which_keys_are_set(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path), "GOOGLE_API_KEY": "g", "GROQ_API_KEY": "q"}
    proc = rlmx_providers(env=env)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines()[1:]}
    assert list(rows) == [r.name for r in BUILT_IN]
    assert "set (GOOGLE_API_KEY)" in rows["gemini"] and "set (GROQ_API_KEY)" in rows["groq"]
    assert "not set" in rows["deepseek"] and "not needed" in rows["ollama"]
    for cloud in CLOUDS:
        assert str(cloud.base_url) in rows[cloud.name] and cloud.example in rows[cloud.name]

    listed = json.loads(rlmx_providers("--json", env={"XDG_CONFIG_HOME": str(tmp_path)}).stdout)
    by_name = {entry["name"]: entry for entry in listed}
    assert by_name["gemini"]["key_envs"] == ["GEMINI_API_KEY", "GOOGLE_API_KEY"]
    assert by_name["gemini"]["key"] == "not set" and by_name["deepseek"]["price_id"] == "deepseek"
    assert by_name["deepseek"]["quirks"]["cached_tokens_at"] == ["prompt_cache_hit_tokens"]


def test_a_key_in_the_config_file_counts_as_set(tmp_path: Path) -> None:
    (tmp_path / "rlmx").mkdir()
    (tmp_path / "rlmx" / "config.toml").write_text('[providers.mistral]\napi_key = "m-key"\n')
    proc = rlmx_providers(env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("mistral "))
    assert "set (config)" in row


def test_the_docs_tables_are_the_registry() -> None:
    """docs/providers.md carries `rlmx providers --markdown` verbatim: a provider added, renamed or
    changed in lm/providers.py without the docs fails here (regenerate with that command)."""
    docs = (ROOT / "docs" / "providers.md").read_text()
    assert providers_table(list(BUILT_IN)) in docs and quirks_table(list(BUILT_IN)) in docs
    assert markdown_tables(list(BUILT_IN)) == providers_table(list(BUILT_IN)) + "\n\n" + quirks_table(
        list(BUILT_IN)
    )


def test_the_readme_providers_table_names_every_provider() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Providers", 1)[1].split("\n## ", 1)[0]
    for provider in BUILT_IN:
        assert f"`{provider.name}`" in section, provider.name
