"""How `rlmx serve` is configured: auth rules at start-up, profiles from a file or the config files (the
ones `rlmx ask` reads), per-run limits that can only go down, and the confinement of roots (shared with the
MCP server)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import mcp_types
import openai
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from rlmx.config import Config
from rlmx.errors import ConfigError
from rlmx.lm.llama_cpp import EMBEDDED_NOTICE
from rlmx.serve.profiles import choose_profiles
from rlmx.serve.roots import PathRefused, Roots
from rlmx.spec.options import RunOptions
from rlmx.testing import ScriptedServer
from serve_helpers import TOKEN, Router, rlmx_serve


def serve_cli(
    *args: str, env: dict[str, str] | None = None, pre: str = ""
) -> subprocess.CompletedProcess[str]:
    """`rlmx serve` that is expected to stop at start-up; `pre` is Python run first (to hide a package)."""
    full_env = {k: v for k, v in os.environ.items() if k != "RLMX_SERVE_TOKEN"} | (env or {})
    code = f"{pre}\nfrom rlmx.cli import main\nmain({['serve', '--port', '0', *args]!r})"
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=60,
    )


def test_no_auth_is_refused_off_loopback_and_a_token_is_required() -> None:
    model = ["--model", "openai:x", "--base-url", "http://127.0.0.1:9/v1"]
    exposed = serve_cli(*model, "--no-auth", "--host", "0.0.0.0")
    assert exposed.returncode == 2
    assert "--no-auth is only allowed on a loopback bind" in exposed.stderr
    tokenless = serve_cli(*model)
    assert tokenless.returncode == 2 and "RLMX_SERVE_TOKEN" in tokenless.stderr
    no_model = serve_cli(
        "--token",
        "long-enough-token",
        env={"RLMX_MODEL": "", "XDG_CONFIG_HOME": "/nonexistent"},
        pre="import sys; sys.modules['llama_cpp'] = None",  # the embedded demo model is not installed
    )
    assert no_model.returncode == 2 and "no model configured" in no_model.stderr


def test_no_auth_on_loopback_needs_no_token(tmp_path: Path) -> None:
    with ScriptedServer(Router()) as srv:
        args = ["--no-auth", "--model", "openai:scripted", "--base-url", srv.url]
        with rlmx_serve(*args, env={"XDG_STATE_HOME": str(tmp_path)}) as proc:
            client = openai.OpenAI(base_url=proc.url, api_key="anything", max_retries=0)
            reply = client.chat.completions.create(
                model="rlmx/scripted", messages=[{"role": "user", "content": "say hello"}]
            )
            assert "NO AUTH" in proc.log()
    assert reply.choices[0].message.content == "hello from rlmx"


def test_profiles_from_a_config_file_and_limits_that_only_go_down(tmp_path: Path) -> None:
    with ScriptedServer(Router()) as srv:
        config = tmp_path / "profiles.toml"
        config.write_text(
            f'[defaults]\nbase_url = "{srv.url}"\n\n'
            '[profiles.big]\nmodel = "openai:scripted"\nmax_iterations = 30\n\n'
            '[profiles.small]\nmodel = "openai:scripted"\nsub_model = "openai:scripted-sub"\n'
            'max_iterations = 2\ndescription = "two turns"\n'
        )
        with rlmx_serve("--profiles", str(config), env={"XDG_STATE_HOME": str(tmp_path)}) as proc:
            client = openai.OpenAI(base_url=proc.url, api_key="test-token-0123456789", max_retries=0)
            models = {m.id: m.model_extra["rlmx"] for m in client.models.list().data}

            def loop(**limits: int) -> openai.types.chat.ChatCompletion:
                return client.chat.completions.create(
                    model="rlmx/small",
                    messages=[{"role": "user", "content": "loop forever"}],
                    extra_body={"rlmx": limits},
                )

            raised, lowered = loop(max_iterations=10), loop(max_iterations=1)
    assert set(models) == {"rlmx/big", "rlmx/small"}
    assert models["rlmx/small"]["sub_model"] == "openai:scripted-sub"
    assert models["rlmx/small"]["limits"]["max_iterations"] == 2
    assert raised.model_extra["rlmx"]["iterations"] == 2  # not raised beyond the profile
    assert lowered.model_extra["rlmx"]["iterations"] == 1
    assert raised.choices[0].finish_reason == "length" and raised.choices[0].message.content == "forced"
    assert raised.model_extra["rlmx"]["stopped_by"] == "max_iterations"


def test_bad_config_files_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[profiles.x]\nmodel = "openai:m"\nmax_iteration = 3\n')
    proc = serve_cli("--profiles", str(bad), "--token", "long-enough-token")
    assert proc.returncode == 2 and "profile 'x': unknown keys max_iteration" in proc.stderr


def test_roots_refuse_escapes_and_narrow_to_client_roots(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_text("x")
    (root / "c.txt").write_text("y")
    (tmp_path / "out.txt").write_text("z")
    (root / "sneaky.txt").symlink_to(tmp_path / "out.txt")
    roots = Roots.of([root])
    assert roots.resolve("a/b/f.txt") == root / "a" / "b" / "f.txt"
    assert roots.resolve(str(root / "c.txt")) == root / "c.txt"
    for spec, status in [
        ("../out.txt", 400),
        ("sneaky.txt", 403),
        (str(tmp_path / "out.txt"), 403),
        ("", 400),
    ]:
        with pytest.raises(PathRefused) as info:
            roots.resolve(spec)
        assert info.value.status == status, spec
    narrowed = roots.narrowed([root / "a"])
    assert narrowed.allowed == (root / "a",)
    assert narrowed.resolve("a/b/f.txt") == root / "a" / "b" / "f.txt"  # still relative to the root
    with pytest.raises(PathRefused):
        narrowed.resolve(str(root / "c.txt"))
    with pytest.raises(PathRefused):
        narrowed.resolve("c.txt")
    assert roots.narrowed([tmp_path]).allowed == (root,)  # a wider client root keeps the server's root
    assert roots.narrowed([tmp_path / "elsewhere"]).allowed == ()
    with pytest.raises(PathRefused, match="without `root` folders"):
        Roots().resolve("c.txt")
    with pytest.raises(PathRefused) as too_big:
        roots.load(["a", "c.txt"], max_bytes=1)
    assert too_big.value.status == 413


def test_chat_requests_become_runs() -> None:
    from rlmx.serve.chat import BadRequest, parse_chat_request
    from rlmx.serve.profiles import ServedProfile

    profiles = {"p": ServedProfile("p", RunOptions(model="openai:m"))}

    def parse(messages: list[dict[str, object]], **body: object) -> object:
        return parse_chat_request({"model": "rlmx/p", "messages": messages, **body}, profiles, threshold=50)

    history = [{"role": "user", "content": f"earlier question {i}"} for i in range(5)]
    run = parse([*history, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "now?"}])
    assert run.question == "now?"  # a transcript longer than the threshold becomes a document
    assert run.documents[0]["path"] == "conversation" and "[assistant] ok" in run.documents[0]["text"]
    short = parse([{"role": "system", "content": "be brief"}, {"role": "user", "content": "q?"}])
    assert short.question == "Conversation so far:\n[system] be brief\n\nq?" and short.documents == []
    typed = parse([{"role": "user", "content": "q"}], response_format={"type": "json_object"}, stream=True)
    assert typed.output is not None and typed.output.schema == {"type": "object"} and typed.stream
    for messages, body, fragment in [
        (
            [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "x"}}]}],
            {},
            "only text and image_url parts",  # images are context documents (tests/images)
        ),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
            {},
            "no question",
        ),
        ([{"role": "user", "content": "q"}], {"n": 2}, "only n=1"),
        ([{"role": "user", "content": "q"}], {"tools": [{"type": "function"}]}, "not supported"),
        ([{"role": "user", "content": "x" * 60}], {}, "no question"),
        (
            [{"role": "user", "content": "q"}],
            {"response_format": {"type": "json_schema"}},
            "must be a JSON schema",
        ),
        (
            [{"role": "user", "content": "q"}],
            {"rlmx": {"paths": "a", "max_depth": "deep"}},
            "must be a number",
        ),
    ]:
        with pytest.raises(BadRequest, match=fragment) as info:
            parse(messages, **body)
        assert info.value.status == 400


# --- the configuration `rlmx ask` reads ----------------------------------------------------------------
def isolated_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No user config file but the test's own, traces under tmp_path."""
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "XDG_STATE_HOME": str(tmp_path / "state"), **extra}


def team_config(srv: ScriptedServer) -> str:
    """A config file with an endpoint, a key from a variable and a price, as `rlmx ask` reads it."""
    return (
        f'[providers.openai]\nbase_url = "{srv.url}"\napi_key_env = "TEAM_KEY"\n'
        '[prices]\n"openai:scripted" = [2.0, 4.0]\n'
    )


def test_a_config_file_gives_a_served_run_its_model_key_limits_and_prices(tmp_path: Path) -> None:
    with ScriptedServer(Router(), auth_token="team-secret") as srv:
        config = tmp_path / "team.toml"
        config.write_text(f'model = "openai:scripted"\n[limits]\nmax_iterations = 3\n{team_config(srv)}')
        env = isolated_env(tmp_path, TEAM_KEY="team-secret")
        with rlmx_serve("--config", str(config), env=env, cwd=tmp_path) as proc:
            client = openai.OpenAI(base_url=proc.url, api_key=TOKEN, max_retries=0)
            card = client.models.retrieve("rlmx/scripted").model_extra["rlmx"]
            reply = client.chat.completions.create(
                model="rlmx/scripted", messages=[{"role": "user", "content": "say hello"}]
            )
        assert srv.requests and all(r.error is None for r in srv.requests)  # the configured key was sent
    assert reply.choices[0].message.content == "hello from rlmx"
    assert card["model"] == "openai:scripted" and card["limits"]["max_iterations"] == 3
    usage = reply.model_extra["rlmx"]["usage"]
    assert usage["input_tokens"] > 0
    assert usage["cost_usd"] == pytest.approx(
        (usage["input_tokens"] * 2.0 + usage["output_tokens"] * 4.0) / 1e6
    )


def test_profiles_in_the_user_config_file_are_served(tmp_path: Path) -> None:
    with ScriptedServer(Router(), auth_token="team-secret") as srv:
        user = tmp_path / "xdg" / "rlmx"
        user.mkdir(parents=True)
        (user / "config.toml").write_text(
            f"{team_config(srv)}[limits]\nmax_llm_calls = 50\n"
            '[profiles.quick]\nmodel = "openai:scripted"\nmax_iterations = 2\n'
            '[profiles.deep]\nmodel = "openai:scripted"\nsub_model = "openai:scripted-sub"\nmax_depth = 2\n'
        )
        env = isolated_env(tmp_path, TEAM_KEY="team-secret")
        with rlmx_serve(env=env, cwd=tmp_path) as proc:
            client = openai.OpenAI(base_url=proc.url, api_key=TOKEN, max_retries=0)
            cards = {m.id: m.model_extra["rlmx"] for m in client.models.list().data}
            looped = client.chat.completions.create(
                model="rlmx/quick", messages=[{"role": "user", "content": "loop forever"}]
            )
        assert srv.requests and all(r.error is None for r in srv.requests)
        stray = serve_cli("--max-depth", "3", "--token", TOKEN, env=env)
    assert set(cards) == {"rlmx/quick", "rlmx/deep"}
    assert cards["rlmx/quick"]["limits"]["max_iterations"] == 2
    assert cards["rlmx/quick"]["limits"]["max_llm_calls"] == 50  # the config's [limits] under each profile
    assert (
        cards["rlmx/deep"]["sub_model"] == "openai:scripted-sub"
        and cards["rlmx/deep"]["limits"]["max_depth"] == 2
    )
    summary = looped.model_extra["rlmx"]
    assert summary["stopped_by"] == "max_iterations" and summary["iterations"] == 2
    usage = summary["usage"]
    assert usage["cost_usd"] == pytest.approx(
        (usage["input_tokens"] * 2.0 + usage["output_tokens"] * 4.0) / 1e6
    )
    assert stray.returncode == 2
    assert "--max-depth describes the profile made from --model" in stray.stderr


def test_with_nothing_configured_the_server_offers_the_embedded_demo_model(tmp_path: Path) -> None:
    with rlmx_serve(env=isolated_env(tmp_path), cwd=tmp_path) as proc:
        client = openai.OpenAI(base_url=proc.url, api_key=TOKEN, max_retries=0)
        cards = {m.id: m.model_extra["rlmx"] for m in client.models.list().data}
        log = proc.log()
    assert EMBEDDED_NOTICE in log
    assert cards["rlmx/smollm2"]["model"] == "local:smollm2"
    assert cards["rlmx/smollm2"]["limits"]["max_iterations"] == 6  # the demo model's short default run


def test_mcp_reads_the_config_file_too(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    with ScriptedServer(Router(), auth_token="team-secret") as srv:
        config = tmp_path / "team.toml"
        config.write_text(
            f'model = "openai:scripted"\n{team_config(srv).replace("[2.0, 4.0]", "[1000, 1000]")}'
        )
        env = {**os.environ, **isolated_env(tmp_path, TEAM_KEY="team-secret")}
        args = ["-m", "rlmx.cli", "mcp", "--root", str(tmp_path / "docs"), "--config", str(config)]
        params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(tmp_path))

        async def ask() -> mcp_types.CallToolResult:
            async with Client(params, read_timeout_seconds=120) as client:
                return await client.call_tool("ask", {"question": "say hello"})

        result = asyncio.run(ask())
        assert srv.requests and all(r.error is None for r in srv.requests)
    text = "\n".join(c.text for c in result.content if isinstance(c, mcp_types.TextContent))
    assert not result.is_error, text
    answer, _, footer = text.partition("\n\n---\n")
    assert answer == "hello from rlmx"
    found = re.search(r"([\d,]+) tokens · \$([\d.]+)", footer)
    assert found is not None, footer  # without the config's price: "cost unknown"
    tokens = int(found.group(1).replace(",", ""))
    assert found.group(2) == f"{tokens * 1000 / 1e6:.4f}"


def test_which_profiles_are_offered() -> None:
    profiles_cfg = Config(
        limits={"max_iterations": 9},
        profiles={"a": {"model": "openai:a", "max_depth": 2}, "b": {"model": "openai:b"}},
    )
    served, note = choose_profiles(profiles_cfg, environ={"RLMX_MODEL": "openai:env"})
    assert list(served) == ["a", "b"] and note is None  # config profiles come before $RLMX_MODEL
    assert (served["a"].limits.max_depth, served["a"].limits.max_iterations) == (2, 9)
    flag_options = RunOptions(model="openai:flag", limits={"max_depth": 0, "timeout_s": None})
    flags, _ = choose_profiles(profiles_cfg, options=flag_options)
    assert list(flags) == ["flag"] and flags["flag"].limits.max_depth == 0  # --model: one profile
    assert flags["flag"].limits.max_iterations == 9
    plain = Config(model="openai:cfg", sub_model="openai:cfg-sub", models_by_depth={2: "openai:d2"})
    at = RunOptions(base_url="http://127.0.0.1:9/v1")
    named, _ = choose_profiles(plain, environ={}, name="x", options=at)
    single = named["x"]
    assert (single.model, single.sub_model) == ("openai:cfg", "openai:cfg-sub")
    models = single.models()  # the config's per-depth models, at the --base-url like every model
    assert models.by_depth[2].name == "openai:d2" and models.sub.name == "openai:cfg-sub"
    assert models.by_depth[2].base_url == "http://127.0.0.1:9/v1"
    env_choice, _ = choose_profiles(plain, environ={"RLMX_MODEL": "openai:env"})
    assert list(env_choice) == ["env"]
    keyed, keyed_note = choose_profiles(Config(), environ={"ANTHROPIC_API_KEY": "sk-ant"})
    assert list(keyed) == ["claude-sonnet-4-5"] and "ANTHROPIC_API_KEY is set" in str(keyed_note)
    with pytest.raises(ConfigError, match="`timeout_s` describes the profile made from `model`"):
        choose_profiles(profiles_cfg, options=RunOptions(limits={"timeout_s": 5.0}))
    with pytest.raises(ConfigError, match="profile 'bad': models_by_depth entries"):
        choose_profiles(Config(profiles={"bad": {"model": "openai:a", "models_by_depth": {"x": "openai:b"}}}))
    with pytest.raises(ConfigError, match=r"profile 'bad': .*max_iterations must be >= 1"):
        choose_profiles(Config(profiles={"bad": {"model": "openai:a", "max_iterations": 0}}))


def test_a_profile_is_one_spec_whose_runs_share_its_models_and_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlmx.serve.profiles import profile_from_table

    (tmp_path / "profiletools_for_test.py").write_text(
        "def shout(text: str) -> str:\n    return text.upper()\n\n\n"
        "def whisper(text: str) -> str:\n    return text.lower()\n\n\n"
        "ROOT = [shout]\nKIDS = [whisper]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    config = Config(limits={"max_iterations": 7}, tools=("profiletools_for_test:KIDS",), sub_tools=())
    table = {
        "model": "openai:a",
        "base_url": "http://127.0.0.1:9/v1",
        "concurrency": 3,
        "max_depth": 2,
        "tools": ["profiletools_for_test:ROOT"],
        "sub_tools": ["profiletools_for_test:KIDS"],
    }
    profile = profile_from_table("p", table, config)
    spec = profile.spec  # data: model strings with their options, tools as references
    assert (spec.model.name, spec.model.options.concurrency) == ("openai:a", 3)
    assert spec.tools == ("profiletools_for_test:ROOT",)  # the profile's tools replace the config's
    assert spec.sub_tools == ("profiletools_for_test:KIDS",)  # and its sub_tools stand over the config's
    assert (spec.limits.max_depth, spec.limits.max_iterations) == (2, 7)
    one, two = profile.rlm(trace=False), profile.rlm(trace=False, limits=profile.limits_for({"max_depth": 1}))
    assert one._models.root is not None and one._models.root is two._models.root  # one concurrency limit
    assert one.prompt_profile is two.prompt_profile and one.tools is two.tools
    assert (one.limits.max_depth, two.limits.max_depth) == (2, 1)
    assert set(one.tools.tools) == {"shout"} and set(one.sub_tools.tools) == {"whisper"}
    inherits = profile_from_table("q", {"model": "openai:a"}, config)
    assert inherits.spec.tools == ("profiletools_for_test:KIDS",) and inherits.spec.sub_tools == ()
    with pytest.raises(ConfigError, match=r"profile 'k': `api_key_env` names RLMX_NOT_SET_FOR_TEST"):
        profile_from_table("k", {"model": "openai:a", "api_key_env": "RLMX_NOT_SET_FOR_TEST"})
