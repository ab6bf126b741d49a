"""How `rlmx serve` is configured: auth rules at start-up, profiles from a file, per-run limits that can
only go down, and the confinement of roots (shared with the MCP server)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from rlmx.serve.roots import PathRefused, Roots
from rlmx.testing import ScriptedServer
from serve_helpers import Router, rlmx_serve


def serve_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "RLMX_SERVE_TOKEN"} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "rlmx.cli", "serve", "--port", "0", *args],
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
    no_model = serve_cli("--token", "long-enough-token", env={"RLMX_MODEL": ""})
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
    with pytest.raises(PathRefused, match="without --root"):
        Roots().resolve("c.txt")
    with pytest.raises(PathRefused) as too_big:
        roots.load(["a", "c.txt"], max_bytes=1)
    assert too_big.value.status == 413


def test_chat_requests_become_runs() -> None:
    from rlmx.serve.chat import BadRequest, parse_chat_request
    from rlmx.serve.profiles import Profile

    profiles = {"p": Profile(name="p", model="openai:m")}

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
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
            {},
            "only text parts",
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
