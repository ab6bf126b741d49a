"""`rlmx.compat.rlms` set-up: backends and their kwargs, environments and tools, recursion (depth 2),
the sub-call callbacks, other backends, sampling arguments, and the official import paths."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from rlms_support import KEY, compat, kwargs_for, ready, repl, roots

from rlmx.compat.rlms import RLM
from rlmx.compat.rlms.clients import backend_model
from rlmx.compat.rlms.environments import environment_of
from rlmx.errors import InvalidSettings
from rlmx.testing import ScriptedModel, ScriptedServer

CONTEXT = "one two three\n" * 10


@pytest.mark.parametrize(
    ("backend", "kwargs", "model", "base_url"),
    [
        ("openai", {"model_name": "gpt-5"}, "openai:gpt-5", None),
        ("vllm", {"model_name": "q", "base_url": "http://h:8000/v1"}, "vllm:q", "http://h:8000/v1"),
        ("openrouter", {"model_name": "a/b"}, "openrouter:a/b", None),
        ("vercel", {"model_name": "a/b"}, "openai:a/b", "https://ai-gateway.vercel.sh/v1"),
        ("portkey", {"model_name": "m"}, "openai:m", "https://api.portkey.ai/v1"),
        ("anthropic", {"model_name": "claude", "max_tokens": 1000}, "anthropic:claude", None),
        (
            "azure_openai",
            {
                "model_name": "m",
                "azure_endpoint": "https://x.openai.azure.com",
                "api_version": "2024-06-01",
                "azure_deployment": "dep",
            },
            "azure:dep",
            "https://x.openai.azure.com",
        ),
        ("gemini", {}, "gemini:gemini-2.5-flash", None),
    ],
)
def test_each_backend_maps_to_an_rlmx_model(
    backend: str, kwargs: dict[str, Any], model: str, base_url: str | None
) -> None:
    mapped = backend_model(backend, {**kwargs, "api_key": KEY, "timeout": 12})
    assert mapped.model == model and mapped.options.base_url == base_url
    assert mapped.options.api_key == KEY and mapped.options.timeout_s == 12
    if backend == "anthropic":
        assert mapped.options.extra == {"max_tokens": "1000"}
    if backend == "azure_openai":
        assert mapped.options.extra == {"api_version": "2024-06-01"}


def test_sampling_args_reach_the_body_as_officially_and_unknown_keys_are_refused_by_name() -> None:
    sampling = {"temperature": 0.2, "max_tokens": 99, "seed": 1, "top_k": None, "extra_body": {"x": 1}}
    mapped = backend_model("openai", {"model_name": "m", "sampling_args": sampling})
    assert mapped.body == {"temperature": 0.2, "max_completion_tokens": 99, "seed": 1, "x": 1}
    claude = backend_model(
        "anthropic", {"model_name": "c", "sampling_args": {"temperature": 0.2, "max_tokens": 9}}
    )
    assert claude.options.temperature == 0.2 and claude.max_output_tokens == 9 and claude.body is None
    with pytest.raises(InvalidSettings, match="'default_headers' is not a setting"):
        backend_model("anthropic", {"model_name": "m", "default_headers": {}})
    with pytest.raises(InvalidSettings, match="'seed' is not sent"):
        backend_model("anthropic", {"model_name": "m", "sampling_args": {"seed": 1}})
    with pytest.raises(InvalidSettings, match="base_url"):
        backend_model("vllm", {"model_name": "m"})
    with pytest.raises(InvalidSettings, match="Unknown backend: nope"):
        backend_model("nope", {"model_name": "m"})


def test_sampling_args_are_sent_with_every_request_as_officially() -> None:
    model = ScriptedModel(root=[repl("print(llm_query('x'))"), ready("'x'")])
    options = {
        "sampling_args": {"temperature": 0.3, "max_tokens": 300, "seed": 7},
        "sub_sampling_args": {"top_p": 0.5},
    }
    with compat(model, **options) as (rlm, srv):
        rlm.completion(CONTEXT)
    body = roots(srv)[0].body
    assert body["temperature"] == 0.3 and body["max_completion_tokens"] == 300 and body["seed"] == 7
    assert "max_tokens" not in body and "top_p" not in body
    sub = next(r for r in srv.requests if r.purpose == "llm_query").body
    assert sub["top_p"] == 0.5 and sub["temperature"] == 0.3  # the root's kwargs, mirrored, plus its own


@pytest.mark.parametrize("name", ["modal", "e2b", "daytona", "prime"])
def test_remote_environments_are_refused_naming_what_rlmx_offers(name: str) -> None:
    with pytest.raises(InvalidSettings, match="environment='local'"):
        environment_of(name, {})


def test_local_docker_and_ipython_are_the_isolated_sandbox_and_say_so_once(caplog: Any) -> None:
    from rlmx.compat.rlms import environments

    environments._told.clear()
    with caplog.at_level(logging.WARNING, logger="rlmx.compat.rlms"):
        for name in ("docker", "docker", "ipython"):
            env = environment_of(name, {"image": "python:3.12"})
            assert env.sandbox.backend == "process" and env.isolated and env.ignored == ("image",)
    assert [r.getMessage().count("isolated sandbox") for r in caplog.records] == [1, 1]
    assert environment_of("local", {"isolated": False}).sandbox.backend == "local"
    with pytest.raises(InvalidSettings, match="Unknown environment"):
        environment_of("cloud", {})


def test_function_tools_run_on_the_host_and_values_are_copied() -> None:
    seen: list[Any] = []

    def fetch(key: str) -> dict[str, Any]:
        seen.append(key)
        return {"key": key, "items": [1, 2]}

    tools = {"fetch": fetch, "LIMIT": {"tool": 3, "description": "how many"}}
    with compat(ScriptedModel(root=[ready("str(fetch('k')['items'] * LIMIT)")]), custom_tools=tools) as (
        rlm,
        _,
    ):
        assert rlm.completion(CONTEXT).response == "[1, 2, 1, 2, 1, 2]"
    assert seen == ["k"]


def test_a_value_that_cannot_cross_is_refused_naming_the_in_process_environment() -> None:
    class Handle:
        size = 7

    tools = {"handle": Handle()}
    with ScriptedServer(ScriptedModel(root=[ready("str(handle.size)")])) as srv:
        rlm = RLM(backend_kwargs=kwargs_for(srv), custom_tools=tools)
        with pytest.raises(InvalidSettings, match=r'environment_kwargs=\{"isolated": False\}'):
            rlm.completion(CONTEXT)
        local = RLM(
            backend_kwargs=kwargs_for(srv), custom_tools=tools, environment_kwargs={"isolated": False}
        )
        assert local.completion(CONTEXT).response == "7"


def test_a_reserved_tool_name_is_refused_as_officially() -> None:
    rlm = RLM(backend_kwargs={"model_name": "m", "api_key": KEY}, custom_tools={"context": 1})
    with pytest.raises(InvalidSettings, match="cannot override reserved"):
        rlm.completion(CONTEXT)


def test_depth_two_starts_a_child_whose_context_is_its_prompt_and_fires_the_callbacks() -> None:
    started: list[tuple[int, str, str]] = []
    done: list[tuple[int, str, str | None]] = []
    model = ScriptedModel(
        root=[repl("r = rlm_query('the child task')\nprint(r)"), ready("'root got ' + r")],
        child=[ready("'child saw ' + context")],
    )
    with compat(
        model,
        max_depth=2,
        on_subcall_start=lambda d, m, p: started.append((d, m, p)),
        on_subcall_complete=lambda d, m, s, e: done.append((d, m, e)),
    ) as (rlm, srv):
        out = rlm.completion(CONTEXT, root_prompt="q")
    assert out.response == "root got child saw the child task"
    child = [r for r in srv.requests if r.purpose == "child_root"]
    assert len(child) == 1 and child[0].messages[1]["content"].startswith("Your context is a str")
    assert started == [(1, "gpt-test", "the child task")] and done == [(1, "gpt-test", None)]


def test_other_backends_serve_the_sub_calls() -> None:
    model = ScriptedModel(root=[repl("print(llm_query('hi'))"), ready("'ok'")], sub="from the helper")
    with ScriptedServer(model) as srv:
        rlm = RLM(
            backend_kwargs=kwargs_for(srv),
            other_backends=["openai"],
            other_backend_kwargs=[kwargs_for(srv, "helper")],
        )
        out = rlm.completion(CONTEXT)
    subs = [r for r in srv.requests if r.purpose == "llm_query"]
    assert [r.model for r in subs] == ["helper"]
    assert set(out.usage_summary.model_usage_summaries) == {"gpt-test", "helper"}
    with pytest.raises(InvalidSettings, match="exactly one"):
        RLM(other_backends=["openai", "openai"], other_backend_kwargs=[{}, {}])


def test_at_max_depth_the_rlm_is_a_plain_model_call() -> None:
    with ScriptedServer(lambda messages, call: "plain reply") as srv:
        rlm = RLM(backend_kwargs=kwargs_for(srv), depth=1, max_depth=1)
        assert rlm.completion("hello") == "plain reply"
    assert len(srv.requests) == 1 and srv.requests[0].messages == [{"role": "user", "content": "hello"}]


def test_the_official_import_paths_work() -> None:
    from rlmx.compat.rlms.core.rlm import RLM as CoreRLM
    from rlmx.compat.rlms.core.types import ModelUsageSummary, RLMChatCompletion, UsageSummary
    from rlmx.compat.rlms.logger import RLMLogger

    assert CoreRLM is RLM and RLMLogger().get_trajectory() is None
    summary = UsageSummary({"m": ModelUsageSummary(1, 2, 3, 0.5)})
    again = RLMChatCompletion.from_dict(RLMChatCompletion("m", "p", "r", summary, 1.0).to_dict())
    assert again.usage_summary.total_cost == 0.5 and again.response == "r"


def test_persistent_is_refused_for_a_remote_environment() -> None:
    with pytest.raises(InvalidSettings, match="persistent=True is not supported"):
        RLM(environment="modal", persistent=True)


def test_the_migration_guides_imports_run_as_written() -> None:
    import re
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "migrating-from-rlms.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert blocks
    namespace: dict[str, Any] = {}
    exec(blocks[0], namespace)
    assert namespace["RLM"] is RLM and namespace["RLMLogger"].__name__ == "RLMLogger"


def test_a_child_rlm_is_one_of_its_blocks_rlm_calls_in_the_trajectory() -> None:
    from rlmx.compat.rlms import RLMLogger

    model = ScriptedModel(root=[repl("r = rlm_query('the child task')"), ready("r")], child=[ready("'c'")])
    with compat(model, max_depth=2, logger=RLMLogger()) as (rlm, _):
        out = rlm.completion(CONTEXT)
    assert out.metadata is not None
    calls = out.metadata["iterations"][0]["code_blocks"][0]["result"]["rlm_calls"]
    assert [(c["root_model"], c["prompt"], c["response"]) for c in calls] == [
        ("gpt-test", "the child task", "c")
    ]
    assert calls[0]["usage_summary"]["model_usage_summaries"]["gpt-test"]["total_calls"] == 1
