"""`--mcp FILE` and the config file's `mcp` key on the command line: a scripted model behind a real
HTTP server, rlmx as a subprocess, the own-SDK server over stdio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mcp_support import repl, small

from rlmx.testing import ScriptedModel, ScriptedServer
from rlmx.trace.events import ToolCall

SRC = str(Path(__file__).resolve().parents[2] / "src")


def rlmx(
    srv: ScriptedServer, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "rlmx.cli",
        "ask",
        "q",
        "--model",
        "openai:scripted",
        "--base-url",
        srv.url,
        *args,
    ]
    environ = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    return subprocess.run(command, capture_output=True, text=True, env=environ, timeout=120, cwd=cwd)


def test_ask_with_mcp_file_gets_the_servers_tools_and_records_each_call(tmp_path: Path) -> None:
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"small": small(env={"TOKEN": "${MCP_TEST_TOKEN}"})}}))
    trace = tmp_path / "run.jsonl"
    policy = ScriptedModel(
        root=[repl("FINAL(str(small_add(40, b=2)) + ' ' + str(len(small_show_env('TOKEN'))))")]
    )
    with ScriptedServer(policy) as srv:
        proc = rlmx(
            srv,
            "--mcp",
            str(servers),
            "--json",
            "--trace",
            str(trace),
            cwd=tmp_path,
            env={"MCP_TEST_TOKEN": "abc"},
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["answer"] == "42 3"
        assert "`small_add(a: int, b: int = 1)`" in srv.requests[0].messages[0]["content"]
    text = trace.read_text()
    records = [json.loads(line) for line in text.splitlines()]
    calls = [(r["name"], r["server"], r["mcp_tool"]) for r in records if r["type"] == ToolCall.TYPE]
    assert calls == [("small_add", "small", "add"), ("small_show_env", "small", "show_env")]
    assert records[0]["spec"]["mcp_servers"] == [str(servers)]


def test_the_config_files_mcp_key_and_a_bad_file_refused_before_any_model_call(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"small": small()}}))
    config = tmp_path / "rlmx-test.toml"
    config.write_text('mcp = ["mcp.json"]\n')
    policy = ScriptedModel(root=[repl("FINAL(str(small_add(1, b=1)))")])
    with ScriptedServer(policy) as srv:
        proc = rlmx(srv, "--config", str(config), "--no-trace", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "2"
        (tmp_path / "sse.json").write_text(
            json.dumps({"mcpServers": {"old": {"type": "sse", "url": "http://x/sse"}}})
        )
        bad = rlmx(srv, "--mcp", str(tmp_path / "sse.json"), cwd=tmp_path)
        missing = rlmx(srv, "--mcp", str(tmp_path / "nope.json"), cwd=tmp_path)
    assert bad.returncode == 2 and "MCP server 'old': the SSE transport" in bad.stderr
    assert missing.returncode == 2 and "--mcp FILE: cannot read" in missing.stderr, missing.stderr
    assert srv.served == 1


def test_a_server_that_does_not_start_is_one_warning_line_and_the_answer_still_comes(tmp_path: Path) -> None:
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"broken": small("fail")}}))
    with ScriptedServer(ScriptedModel(root=["FINAL(fine)"])) as srv:
        proc = rlmx(srv, "--mcp", str(servers), "--no-trace", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "fine"
    lines = [line for line in proc.stderr.splitlines() if "MCP server 'broken'" in line]
    assert len(lines) == 1 and "did not start" in lines[0] and "cannot open its database" in lines[0], (
        proc.stderr
    )


def test_doctor_starts_each_server_and_counts_its_tools(tmp_path: Path) -> None:
    servers = tmp_path / "servers.json"
    servers.write_text(
        json.dumps({"mcpServers": {"small": small(), "gone": {"command": "rlmx-no-such-mcp-server"}}})
    )
    command = [sys.executable, "-m", "rlmx.cli", "doctor", "--mcp", str(servers), "--json"]
    proc = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=120,
        cwd=tmp_path,
    )
    report = {r["server"]: r for r in json.loads(proc.stdout)["mcp"]}
    assert (
        report["small"]["ok"] and report["small"]["tools"] == 11 and report["small"]["transport"] == "stdio"
    )
    assert not report["gone"]["ok"] and "rlmx-no-such-mcp-server" in report["gone"]["error"]


def test_chat_keeps_one_server_for_the_whole_conversation(tmp_path: Path) -> None:
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"small": small()}}))
    policy = ScriptedModel(root=[repl("FINAL(str(small_pid()))")])
    with ScriptedServer(policy) as srv:
        command = [
            sys.executable,
            "-m",
            "rlmx.cli",
            "chat",
            "--model",
            "openai:scripted",
            "--base-url",
            srv.url,
        ]
        proc = subprocess.run(
            [*command, "--mcp", str(servers), "--no-trace", "--quiet"],
            input="first\nsecond\n/exit\n",
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": SRC, "OPENAI_API_KEY": "test"},
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    answers = [line for line in proc.stdout.splitlines() if line.strip().isdigit()]
    assert len(answers) == 2 and answers[0] == answers[1], proc.stdout


def test_batch_on_the_command_line_shares_one_server_across_its_items(tmp_path: Path) -> None:
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"small": small()}}))
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": str(i), "question": f"q{i}"}) + "\n" for i in range(3)))
    out = tmp_path / "results.jsonl"
    policy = ScriptedModel(root=[repl("FINAL(str(small_pid()))")])
    with ScriptedServer(policy) as srv:
        command = [
            sys.executable,
            "-m",
            "rlmx.cli",
            "batch",
            str(items),
            "--out",
            str(out),
            "--mcp",
            str(servers),
        ]
        proc = subprocess.run(
            [*command, "--model", "openai:scripted", "--base-url", srv.url, "--no-trace"],
            capture_output=True, text=True, timeout=180, cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": SRC, "OPENAI_API_KEY": "test"},
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and len({row["answer"] for row in rows}) == 1 and rows[0]["answer"].isdigit(), rows
