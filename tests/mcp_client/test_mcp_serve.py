"""`rlmx serve --mcp FILE`: each caller's run gets MCP servers of its own, never another caller's."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp_support import repl, small

from rlmx.testing import ScriptedModel, ScriptedServer
from serve_helpers import TOKEN, rlmx_serve

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_two_callers_of_serve_never_share_a_server(tmp_path: Path) -> None:
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"small": small()}}))
    policy = ScriptedModel(root=[repl("FINAL(str(small_pid()))")])
    with ScriptedServer(policy) as model:
        args = ["--model", "openai:scripted", "--base-url", model.url, "--mcp", str(servers)]
        env = {"XDG_STATE_HOME": str(tmp_path / "state"), "PYTHONPATH": SRC, "OPENAI_API_KEY": "sk-test-fake"}
        with rlmx_serve(*args, env=env) as served:
            caller = openai.OpenAI(base_url=served.url, api_key=TOKEN, max_retries=0, timeout=120)
            pids = [
                caller.chat.completions.create(
                    model="rlmx/scripted", messages=[{"role": "user", "content": "q"}]
                )
                .choices[0]
                .message.content
                for _ in range(2)
            ]
    assert all(p and p.isdigit() for p in pids) and pids[0] != pids[1], pids
    assert os.getpid() not in {int(p) for p in pids if p}


def test_mcp_given_to_serve_holds_for_every_profile_of_the_config(tmp_path: Path) -> None:
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"small": small()}}))
    policy = ScriptedModel(root=[repl("FINAL(str(small_add(20, b=22)))")])
    with ScriptedServer(policy) as model:
        config = tmp_path / "rlmx-test.toml"
        config.write_text(f'[profiles.quick]\nmodel = "openai:scripted"\nbase_url = "{model.url}"\n')
        env = {"XDG_STATE_HOME": str(tmp_path / "state"), "PYTHONPATH": SRC, "OPENAI_API_KEY": "sk-test-fake"}
        with rlmx_serve("--config", str(config), "--mcp", str(servers), env=env) as served:
            caller = openai.OpenAI(base_url=served.url, api_key=TOKEN, max_retries=0, timeout=120)
            reply = caller.chat.completions.create(
                model="rlmx/quick", messages=[{"role": "user", "content": "q"}]
            )
    assert reply.choices[0].message.content == "42"
