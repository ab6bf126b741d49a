"""The README's serve and MCP examples are the files in examples/, included verbatim, and they run as written
against `rlmx serve` / `rlmx mcp` backed by the scripted model (only model names and the base URL change)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from policies import is_forced_final, is_rlm, question, repl, turn
from rlmx.testing import ScriptedServer
from serve_helpers import TOKEN, rlmx_serve

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
EXAMPLES = ROOT / "examples"
BIN = Path(sys.executable).parent
REAL_MODELS = {"openai:gpt-5-mini": "openai:scripted", "openai:gpt-5-nano": "openai:scripted"}
LOGS = {"auth.log": {"auth": 3}, "payments.log": {"payments": 7}, "search.log": {"search": 1}}

COUNT = r"""
import re, collections
docs = context if isinstance(context, list) else [{'path': 'text', 'text': context}]
counts = collections.Counter(m.group(1) for d in docs for m in re.finditer(r'service=(\w+) .*timeout', d['text']))
service, n = counts.most_common(1)[0]
busiest = {'service': service, 'timeouts': n}
text = f'{service} ({n} timeouts)'
print(counts)
"""
SUMMARISE = r"""
summaries = llm_query_batched(['Summarise this log in one line:\n' + d['text'] for d in context])
report = '\n'.join(d['path'] + ': ' + s for d, s in zip(context, summaries))
"""


def policy(messages: list[dict[str, Any]], request: Any) -> str:
    """A model that really does the work in the REPL: counts timeouts per service, or summarises each log."""
    if not is_rlm(request):
        return f"{messages[-1]['content'].count('service=')} entries"
    if is_forced_final(request):
        return "FINAL(forced)"
    typed = "## Answer format" in messages[0]["content"]
    if "Summarise each log file" in question(messages):
        return repl(SUMMARISE) if turn(messages) == 0 else "FINAL_VAR(report)"
    if turn(messages) == 0:
        return repl(COUNT)
    return "FINAL_VAR(busiest)" if typed else "FINAL_VAR(text)"


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(policy) as srv:
        yield srv


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("examples")
    logs = base / "data" / "logs"
    logs.mkdir(parents=True)
    for name, counts in LOGS.items():
        lines = [
            f"2026-01-0{i % 9 + 1} service={svc} level=error msg=upstream timeout"
            for svc, n in counts.items()
            for i in range(n)
        ]
        lines.append(f"2026-01-09 service={next(iter(counts))} level=info msg=ok")
        logs.joinpath(name).write_text("\n".join(lines) + "\n")
    return base


def fenced_blocks(section_heading: str) -> list[tuple[str, str]]:
    section = README.split(section_heading, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(\w+)\n(.*?)```", section, re.DOTALL)


def bash_line(section_heading: str, prefix: str) -> list[str]:
    for lang, body in fenced_blocks(section_heading):
        if lang == "bash":
            for line in body.splitlines():
                if line.startswith(prefix):
                    return shlex.split(line.split("#", 1)[0])
    raise AssertionError(f"no `{prefix}` line in {section_heading!r}")


def test_readme_includes_the_example_files_verbatim() -> None:
    openai_blocks = [
        body for lang, body in fenced_blocks("## Use it from any OpenAI client") if lang == "python"
    ]
    assert openai_blocks == [(EXAMPLES / "openai_client.py").read_text()]
    mcp_blocks = fenced_blocks("## Use it from an MCP client")
    assert ("json", (EXAMPLES / "mcp_config.json").read_text()) in mcp_blocks
    assert ("python", (EXAMPLES / "mcp_client.py").read_text()) in mcp_blocks


def test_openai_example_against_the_readme_serve_command(model_server: ScriptedServer, workdir: Path) -> None:
    argv = bash_line("## Use it from any OpenAI client", "rlmx serve")
    assert argv[:2] == ["rlmx", "serve"] and "--root" in argv
    command = [sys.executable, "-m", "rlmx.cli", *[REAL_MODELS.get(a, a) for a in argv[1:]]]
    command += ["--base-url", model_server.url, "--port", "0"]
    env = {"XDG_STATE_HOME": str(workdir / "state")}
    with rlmx_serve(command=command, cwd=workdir, env=env) as server:
        proc = subprocess.run(
            [sys.executable, str(EXAMPLES / "openai_client.py")],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "RLMX_BASE_URL": server.url, "RLMX_SERVE_TOKEN": TOKEN},
        )
    assert proc.returncode == 0, proc.stderr + server.log()
    out = proc.stdout
    lines = out.splitlines()
    assert lines[0] == "payments (7 timeouts)"
    assert re.match(r"\d+ tokens in the whole run; trace id [0-9a-f]{12}$", lines[1])
    assert "... turn 1: the root model replied" in out and "... run ended (final)" in out
    assert "logs/auth.log: 4 entries\nlogs/payments.log: 8 entries\nlogs/search.log: 2 entries" in out
    assert lines[-1] == "Busiest(service='payments', timeouts=7)"


def mcp_answer(command: str, args: list[str], env: dict[str, str], cwd: Path | None = None) -> str:
    async def go() -> str:
        params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
        async with Client(params, read_timeout_seconds=120) as client:
            result = await client.call_tool(
                "ask", {"question": "Which service logs the most timeouts?", "paths": ["logs"]}
            )
        assert not result.is_error, result.content
        return "\n".join(c.text for c in result.content if isinstance(c, mcp_types.TextContent))

    return asyncio.run(go())


def server_env(model_server: ScriptedServer, workdir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "XDG_STATE_HOME": str(workdir / "state"),
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
    }


def test_mcp_client_config_block_starts_a_working_server(model_server: ScriptedServer, workdir: Path) -> None:
    config = json.loads((EXAMPLES / "mcp_config.json").read_text())["mcpServers"]["rlmx"]
    assert config["command"] == "rlmx"
    args = [REAL_MODELS.get(a, a) for a in config["args"]]
    args[args.index("/home/me/project")] = str(workdir / "data")
    env = {**server_env(model_server, workdir), **config["env"]}
    answer = mcp_answer(str(BIN / "rlmx"), [*args, "--base-url", model_server.url], env)
    assert answer.startswith("payments (7 timeouts)\n\n---\n") and "trace: " in answer


def test_claude_code_command_starts_a_working_server(model_server: ScriptedServer, workdir: Path) -> None:
    argv = bash_line("## Use it from an MCP client", "claude mcp add")
    server_argv = argv[argv.index("--") + 1 :]
    assert server_argv[0] == "rlmx"
    args = [REAL_MODELS.get(a, a) for a in server_argv[1:]] + ["--base-url", model_server.url]
    answer = mcp_answer(str(BIN / "rlmx"), args, server_env(model_server, workdir), cwd=workdir / "data")
    assert answer.startswith("payments (7 timeouts)")


def test_mcp_python_example_runs_as_written(model_server: ScriptedServer, workdir: Path) -> None:
    env = {
        **server_env(model_server, workdir),
        "RLMX_MODEL": "openai:scripted",
        "OPENAI_BASE_URL": model_server.url,
        "OPENAI_API_KEY": "sk-scripted",
    }
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "mcp_client.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=workdir / "data",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "... turn 1: the root model replied" in proc.stdout
    answer = proc.stdout.split("payments (7 timeouts)", 1)
    assert len(answer) == 2 and "stopped by final" in answer[1] and "trace: " in answer[1]
