"""Sampling and reasoning settings per model role: what reaches the provider's request body (root turns,
sub-calls, children, per depth) from the CLI, the config file, serve profiles and the Python API; a
provider's 400 said as the setting it refused, after one request; bad values refused at parsing."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rlmx import RLM, Limits
from rlmx.config import Config, ModelChoice, load_config, resolve_models
from rlmx.errors import ConfigError, ModelError
from rlmx.lm.base import CallSettings
from rlmx.lm.cache import CachedLM, ResponseCache, cache_key
from rlmx.lm.openai_compat import OpenAICompatLM
from rlmx.lm.options import ModelOptions
from rlmx.lm.providers import ProviderRecord
from rlmx.lm.registry import PROVIDERS, resolve_model
from rlmx.lm.sampling import Sampling, sampling_of
from rlmx.sandbox.base import SandboxSettings
from rlmx.serve.profiles import choose_profiles, profile_from_table
from rlmx.spec.options import RunOptions
from rlmx.testing import Fault, ScriptedModel, ScriptedServer

RLMX = [sys.executable, "-m", "rlmx.cli"]
SAMPLED = ("temperature", "top_p", "reasoning_effort")


def rlmx(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RLMX, *args], capture_output=True, text=True, env=dict(os.environ), timeout=120)


def sent(request: Any) -> dict[str, Any]:
    """The sampling settings one recorded request (or request body) carried."""
    body = request if isinstance(request, dict) else request.body
    return {key: body[key] for key in SAMPLED if key in body}


def by_role(srv: ScriptedServer) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """(purpose, depth) -> the sampling settings of each such request, from the x-rlmx-* headers."""
    roles: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for request in srv.requests:
        purpose = request.headers["x-rlmx-purpose"]
        depth = int(request.headers["x-rlmx-depth"])
        roles.setdefault((purpose, depth), []).append(sent(request))
    return roles


# the root asks one sub-call, then answers
ONE_SUB = ScriptedModel(root=["```repl\nprint(llm_query('a leaf'))\n```", "FINAL(done)"], sub="leaf")
# the root starts a child RLM (depth 1), whose code makes a sub-call (depth 2)
CHILD = ScriptedModel(
    root=["```repl\nprint(rlm_query('a child question'))\n```", "FINAL(done)"],
    child=["```repl\nprint(llm_query('a leaf'))\n```", "FINAL(child done)"],
    sub="leaf",
)


def local() -> SandboxSettings:
    """Model code runs in this process: these tests look at requests, not at isolation."""
    return SandboxSettings(backend="local")


def ask(srv: ScriptedServer, *extra: str) -> subprocess.CompletedProcess[str]:
    return rlmx("ask", "q", "--model", "openai:scripted", "--base-url", srv.url, "--no-trace", "-q", *extra)


# --- the command line -----------------------------------------------------------------------------------


def test_cli_settings_reach_the_bodies_per_role() -> None:
    with ScriptedServer(ONE_SUB) as srv:
        proc = ask(
            srv,
            "--temperature",
            "0.2",
            "--sub-temperature",
            "0.7",
            "--top-p",
            "0.9",
            "--reasoning-effort",
            "low",
        )
        roles = by_role(srv)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr
    root = {"temperature": 0.2, "top_p": 0.9, "reasoning_effort": "low"}
    assert roles[("root", 0)] == [root, root]
    # the sub-model is the root model here: it takes the root's settings for those it does not set
    assert roles[("llm_query", 1)] == [{"temperature": 0.7, "top_p": 0.9, "reasoning_effort": "low"}]


def test_a_sub_model_of_its_own_takes_only_its_own_settings() -> None:
    with ScriptedServer(ONE_SUB, models=("scripted", "small")) as srv:
        proc = ask(
            srv, "--sub-model", "openai:small", "--temperature", "0.2", "--sub-reasoning-effort", "minimal"
        )
        roles = by_role(srv)
        models = {r.headers["x-rlmx-purpose"]: r.body["model"] for r in srv.requests}
    assert proc.returncode == 0, proc.stderr
    assert models == {"root": "scripted", "llm_query": "small"}
    assert roles[("root", 0)] == [{"temperature": 0.2}] * 2
    assert roles[("llm_query", 1)] == [{"reasoning_effort": "minimal"}]


def test_without_settings_nothing_is_sent() -> None:
    with ScriptedServer(ONE_SUB) as srv:
        proc = ask(srv)
        assert proc.returncode == 0, proc.stderr
        assert all(sent(r) == {} for r in srv.requests) and len(srv.requests) == 3


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--reasoning-effort", "extreme"],
            "Invalid value for '--reasoning-effort': must be one of none, minimal",
        ),
        (["--sub-reasoning-effort", "maximal"], "Invalid value for '--sub-reasoning-effort'"),
        (["--temperature", "2.5"], "Invalid value for '--temperature': must be a number from 0 to 2"),
        (["--top-p", "1.5"], "Invalid value for '--top-p': must be a number from 0 to 1"),
        (["--sub-temperature", "warm"], "Invalid value for '--sub-temperature'"),
    ],
)
def test_a_bad_value_exits_2_with_one_line(args: list[str], expected: str) -> None:
    proc = rlmx("ask", "q", "--model", "openai:scripted", "--base-url", "http://127.0.0.1:9/v1", *args)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlmx: error: " + expected), proc.stderr


def test_the_options_are_in_the_help() -> None:
    out = subprocess.run(
        [*RLMX, "ask", "--help"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}
    ).stdout
    for flag in ("--temperature", "--top-p", "--reasoning-effort", "--sub-temperature", "--sub-top-p"):
        assert flag in out, flag
    assert "--sub-reasoning-effort" in out


# --- a provider that refuses a setting --------------------------------------------------------------------


def test_a_400_naming_top_p_is_one_line_naming_it_and_the_model_after_one_request() -> None:
    refusal = "Unsupported parameter: 'top_p' is not supported with this model."
    with ScriptedServer(ONE_SUB, faults=lambda r: Fault.status(400, message=refusal)) as srv:
        proc = ask(srv, "--top-p", "0.9", "--temperature", "0.3")
        requests, url = srv.requests, srv.url
    assert proc.returncode == 1 and len(requests) == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    line = lines[0]
    assert f"openai:scripted at {url}" in line
    assert "refused top_p=0.9" in line and "temperature=0.3" not in line  # only the one it named
    assert "--top-p" in line and refusal in line


def test_a_400_that_names_no_setting_lists_those_sent_and_suggests_dropping_them() -> None:
    with ScriptedServer(ONE_SUB, faults=lambda r: Fault.status(400, message="invalid request")) as srv:
        proc = ask(srv, "--temperature", "0.3", "--reasoning-effort", "high")
        assert len(srv.requests) == 1
    line = proc.stderr.strip()
    assert proc.returncode == 1 and len(line.splitlines()) == 1
    assert "invalid request" in line and "temperature=0.3, reasoning_effort=high" in line
    assert "--temperature" in line and "--reasoning-effort" in line


def test_a_400_without_settings_is_left_as_the_provider_said_it() -> None:
    with ScriptedServer(ONE_SUB, faults=lambda r: Fault.status(400, message="invalid request")) as srv:
        lm = OpenAICompatLM("scripted", base_url=srv.url)
        with pytest.raises(ModelError) as caught:
            asyncio.run(lm.complete([{"role": "user", "content": "hi"}], CallSettings()))
    assert caught.value.attempts == 1 and "sampling" not in str(caught.value)


def test_a_setting_the_provider_record_rejects_fails_before_any_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = ProviderRecord(
        "picky",
        "rlmx.lm.compatible:compatible_model",
        base_url="http://127.0.0.1:9/v1",
        settings={"rejects": ("top_p",)},
    )
    monkeypatch.setitem(PROVIDERS, "picky", record)
    with pytest.raises(ConfigError, match=r"picky:m: the picky provider does not take top_p; remove `top_p`"):
        resolve_models(Config(), ModelChoice("picky:m", None), sampling=Sampling(top_p=0.5))
    resolve_models(Config(), ModelChoice("picky:m", None), sampling=Sampling(temperature=0.5))  # accepted


# --- the config file, per depth ---------------------------------------------------------------------------


def test_config_file_settings_per_role_and_per_depth(tmp_path: Path) -> None:
    config = tmp_path / "sampling.toml"
    config.write_text(
        "temperature = 0.2\n"
        'reasoning_effort = "medium"\n'
        "sub_temperature = 0.6\n"
        "[models_by_depth]\n"
        "2 = { temperature = 0.1, top_p = 0.5 }\n"
    )
    with ScriptedServer(CHILD) as srv:
        proc = ask(srv, "--config", str(config), "--max-depth", "2")
        roles = by_role(srv)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr
    assert roles[("root", 0)] == [{"temperature": 0.2, "reasoning_effort": "medium"}] * 2
    # the child (depth 1) runs on the sub-model: its temperature, the root's effort (the same model)
    assert roles[("child_root", 1)] == [{"temperature": 0.6, "reasoning_effort": "medium"}] * 2
    # depth 2 has its own table, over the sub-model's settings
    assert roles[("llm_query", 2)] == [{"temperature": 0.1, "top_p": 0.5, "reasoning_effort": "medium"}]


def test_command_line_settings_win_over_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "sampling.toml"
    config.write_text("temperature = 0.2\ntop_p = 0.8\n")
    with ScriptedServer(ONE_SUB) as srv:
        proc = ask(srv, "--config", str(config), "--temperature", "1.1")
        roles = by_role(srv)
    assert proc.returncode == 0, proc.stderr
    assert roles[("root", 0)][0] == {"temperature": 1.1, "top_p": 0.8}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('reasoning_effort = "maximal"\n', "reasoning_effort must be one of"),
        ("sub_top_p = 3\n", "sub_top_p must be a number from 0 to 1"),
        ("temperature = true\n", "temperature has the wrong type"),
        ("[models_by_depth]\n2 = { temprature = 0.1 }\n", "unknown key 'temprature' at depth 2"),
        ("[models_by_depth]\n2 = { top_p = -1 }\n", "depth 2: top_p must be a number from 0 to 1"),
    ],
)
def test_a_bad_config_value_names_the_file_and_the_key(tmp_path: Path, text: str, expected: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=expected) as caught:
        load_config(config, cwd=tmp_path)
    assert str(config) in str(caught.value)


# --- serve / mcp profiles -------------------------------------------------------------------------------


def test_a_profile_table_sets_each_role_and_depth() -> None:
    table = {
        "model": "openai:scripted",
        "sub_model": "openai:small",
        "base_url": "http://127.0.0.1:9/v1",
        "top_p": 0.9,
        "sub_temperature": 0.4,
        "models_by_depth": {"2": {"model": "openai:tiny", "reasoning_effort": "low"}},
    }
    models = profile_from_table("p", table, Config(sampling=Sampling(temperature=0.3))).models()
    assert sampling_of(models.root) == Sampling(temperature=0.3, top_p=0.9)  # over the config's
    assert sampling_of(models.sub) == Sampling(temperature=0.4)
    assert sampling_of(models.by_depth[2]) == Sampling(reasoning_effort="low")


def test_sampling_flags_are_refused_beside_a_profiles_file(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles.toml"
    profiles.write_text('[profiles.a]\nmodel = "openai:scripted"\n')
    stray = RunOptions(sub_sampling=Sampling(top_p=0.5))
    with pytest.raises(ConfigError, match="`sub_top_p` describes the profile made from `model`"):
        choose_profiles(Config(), profiles_file=profiles, options=stray)


def test_the_flags_make_the_served_profile() -> None:
    flags = RunOptions(
        model="openai:scripted",
        base_url="http://127.0.0.1:9/v1",
        sampling=Sampling(temperature=0.2),
        sub_sampling=Sampling(reasoning_effort="high"),
    )
    profiles, _ = choose_profiles(Config(), options=flags)
    models = next(iter(profiles.values())).models()
    assert sampling_of(models.root) == Sampling(temperature=0.2)
    assert sampling_of(models.sub) == Sampling(temperature=0.2, reasoning_effort="high")
    assert models.sub is not models.root  # one model, two sets of settings: two model objects


# --- the Python API -----------------------------------------------------------------------------------


def test_model_options_reach_every_request_from_python() -> None:
    with ScriptedServer(ONE_SUB) as srv:
        options = ModelOptions(base_url=srv.url, temperature=0.3, top_p=0.95)
        result = RLM("openai:scripted", model_options=options, trace=False, sandbox=local()).run("q")
        assert result.answer == "done"
        assert [sent(r) for r in srv.requests] == [{"temperature": 0.3, "top_p": 0.95}] * 3


def test_sub_model_options_set_the_sub_model_s_settings_from_python() -> None:
    with ScriptedServer(CHILD) as srv:
        rlm = RLM(
            "openai:scripted",
            model_options=ModelOptions(base_url=srv.url, temperature=0.2),
            sub_model_options=ModelOptions(base_url=srv.url, temperature=0.7, top_p=0.5),
            models_by_depth={2: "openai:scripted"},
            limits=Limits(max_depth=2),
            trace=False,
            sandbox=local(),
        )
        result = rlm.run("q")
        roles = by_role(srv)
    assert result.answer == "done"
    assert roles[("root", 0)] == [{"temperature": 0.2}] * 2
    assert roles[("child_root", 1)] == [{"temperature": 0.7, "top_p": 0.5}] * 2
    assert roles[("llm_query", 2)] == [{"temperature": 0.7, "top_p": 0.5}]  # a depth >= 1 string


def test_per_role_settings_from_python_through_model_objects() -> None:
    with ScriptedServer(CHILD) as srv:

        def model(**sampling: Any) -> Any:
            return resolve_model("openai:scripted", ModelOptions(base_url=srv.url, **sampling))

        result = RLM(
            model(temperature=0.2),
            sub_model=model(temperature=0.7),
            models_by_depth={2: model(reasoning_effort="low")},
            limits=Limits(max_depth=2),
            trace=False,
            sandbox=local(),
        ).run("q")
        roles = by_role(srv)
    assert result.answer == "done"
    assert roles[("root", 0)] == [{"temperature": 0.2}] * 2
    assert roles[("child_root", 1)] == [{"temperature": 0.7}] * 2
    assert roles[("llm_query", 2)] == [{"reasoning_effort": "low"}]


def test_model_options_refuse_bad_values() -> None:
    with pytest.raises(ValueError, match="reasoning_effort must be one of"):
        ModelOptions(reasoning_effort="extreme")
    with pytest.raises(ConfigError, match="temperature must be a number from 0 to 2"):
        ModelOptions(temperature=-0.1)
    assert ModelOptions(reasoning_effort=" High ").reasoning_effort == "high"


# --- Anthropic and the in-process model -----------------------------------------------------------------


def test_anthropic_bodies_carry_the_settings_per_role() -> None:
    pytest.importorskip("anthropic")
    with ScriptedServer(ONE_SUB) as srv:

        def claude(**sampling: Any) -> Any:
            return resolve_model(
                "anthropic:scripted", ModelOptions(base_url=srv.base_url, api_key="k", **sampling)
            )

        root, sub = claude(temperature=0.5, top_p=0.8), claude(reasoning_effort="high")
        result = RLM(root, sub_model=sub, trace=False, sandbox=local()).run("q")
        requests = srv.requests
    assert result.answer == "done"
    assert {r.api for r in requests} == {"anthropic"} and len(requests) == 3
    bodies = {r.headers["x-rlmx-purpose"]: r.body for r in requests}
    assert (
        sent(bodies["root"]) == {"temperature": 0.5, "top_p": 0.8} and "output_config" not in bodies["root"]
    )
    # reasoning_effort is the Messages API's effort setting
    assert sent(bodies["llm_query"]) == {} and bodies["llm_query"]["output_config"] == {"effort": "high"}
    assert all(r.body["max_tokens"] > 0 for r in requests)


def test_anthropic_refuses_an_effort_it_has_no_counterpart_for_and_a_temperature_above_1() -> None:
    pytest.importorskip("anthropic")
    url = "http://127.0.0.1:9"
    with pytest.raises(ConfigError, match=r"anthropic:m: reasoning_effort 'minimal' has no counterpart"):
        resolve_model("anthropic:m", ModelOptions(base_url=url, api_key="k", reasoning_effort="minimal"))
    with pytest.raises(ConfigError, match="Anthropic takes a temperature from 0 to 1"):
        resolve_model("anthropic:m", ModelOptions(base_url=url, api_key="k", temperature=1.5))


def test_an_anthropic_400_naming_the_settings_names_them() -> None:
    pytest.importorskip("anthropic")
    refusal = "temperature and top_p cannot both be specified for this model"
    with ScriptedServer(ONE_SUB, faults=lambda r: Fault.status(400, message=refusal)) as srv:
        lm = resolve_model(
            "anthropic:m", ModelOptions(base_url=srv.base_url, api_key="k", temperature=0.5, top_p=0.8)
        )
        with pytest.raises(ModelError) as caught:
            asyncio.run(lm.complete([{"role": "user", "content": "hi"}], CallSettings()))
        assert len(srv.requests) == 1
    assert "refused temperature=0.5, top_p=0.8" in str(caught.value) and "anthropic:m at" in str(caught.value)
    assert caught.value.attempts == 1


def test_an_anthropic_400_naming_effort_names_reasoning_effort() -> None:
    pytest.importorskip("anthropic")
    refusal = "output_config.effort: this model does not support the effort parameter"
    with ScriptedServer(ONE_SUB, faults=lambda r: Fault.status(400, message=refusal)) as srv:
        lm = resolve_model(
            "anthropic:m", ModelOptions(base_url=srv.base_url, api_key="k", reasoning_effort="low")
        )
        with pytest.raises(
            ModelError, match=r"refused reasoning_effort=low for this model.*`reasoning_effort`"
        ):
            asyncio.run(lm.complete([{"role": "user", "content": "hi"}], CallSettings()))


def test_the_local_model_gets_temperature_and_top_p(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import threading

    from rlmx.lm import llama_cpp

    seen: dict[str, Any] = {}

    class FakeLlama:
        def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
            seen.update(kwargs)
            return {"choices": [{"message": {"content": "hi"}}], "usage": {}}

    monkeypatch.setattr(llama_cpp, "_load", lambda *args: (FakeLlama(), threading.Lock()))
    lm = llama_cpp.LlamaCppLM(
        tmp_path / "m.gguf", name="local:m", sampling=Sampling(temperature=0.1, top_p=0.7)
    )
    asyncio.run(lm.complete([{"role": "user", "content": "q"}], CallSettings()))
    assert seen["temperature"] == 0.1 and seen["top_p"] == 0.7
    with pytest.raises(ConfigError, match="local:m does not take reasoning_effort"):
        llama_cpp.LlamaCppLM(tmp_path / "m.gguf", name="local:m", sampling=Sampling(reasoning_effort="low"))


# --- the response cache ---------------------------------------------------------------------------------


def test_the_cache_key_includes_the_sampling_settings() -> None:
    messages = [{"role": "user", "content": "hi"}]
    plain = cache_key("m@x", messages, CallSettings())
    assert cache_key("m@x", messages, CallSettings(), Sampling()) == plain  # old entries still found
    keys = {
        plain,
        cache_key("m@x", messages, CallSettings(), Sampling(top_p=0.5)),
        cache_key("m@x", messages, CallSettings(), Sampling(reasoning_effort="low")),
        cache_key("m@x", messages, CallSettings(), Sampling(temperature=0.5)),
    }
    assert len(keys) == 4


def test_cached_replies_are_not_shared_across_sampling_settings(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    messages = [{"role": "user", "content": "hi"}]
    with ScriptedServer(lambda m, r: "reply") as srv:

        def ask_once(top_p: float) -> None:
            lm = CachedLM(OpenAICompatLM("scripted", base_url=srv.url, sampling=Sampling(top_p=top_p)), cache)
            assert sampling_of(lm) == Sampling(top_p=top_p)
            asyncio.run(lm.complete(messages, CallSettings()))

        ask_once(0.5)
        ask_once(0.5)
        ask_once(0.6)
        assert [sent(r) for r in srv.requests] == [{"top_p": 0.5}, {"top_p": 0.6}]
    cache.close()
