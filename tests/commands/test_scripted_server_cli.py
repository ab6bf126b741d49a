"""`rlmx scripted-server` from a shell (its URL answers OpenAI chat requests) and `rlmx chat`'s /help."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from policies import is_root
from rlmx.testing import ScriptedServer

RLMX = [sys.executable, "-m", "rlmx.cli"]


def start(*args: str, cwd: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [*RLMX, "scripted-server", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=dict(os.environ),
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()  # printed (and flushed) once it listens
    return proc, url


def chat(url: str, text: str) -> httpx.Response:
    body = {"model": "scripted", "messages": [{"role": "user", "content": text}]}
    return httpx.post(f"{url}/chat/completions", json=body, headers={"Authorization": "Bearer x"}, timeout=30)


def stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=30)


def test_replies_file_is_served_in_order_then_says_it_is_used_up(tmp_path: Path) -> None:
    replies = tmp_path / "replies.jsonl"
    replies.write_text(
        json.dumps("first reply") + "\n\n" + json.dumps({"text": "second", "output_tokens": 7}) + "\n"
    )
    proc, url = start("--replies", str(replies), cwd=tmp_path)
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1"), proc.stderr
        one, two, three = chat(url, "a"), chat(url, "b"), chat(url, "c")
        assert one.json()["choices"][0]["message"]["content"] == "first reply"
        assert two.json()["choices"][0]["message"]["content"] == "second"
        assert two.json()["usage"]["completion_tokens"] == 7
        assert three.status_code == 500 and "used up" in three.text
    finally:
        code = stop(proc)
    assert code == 0


def test_policy_function_answers_from_outside_python(tmp_path: Path) -> None:
    (tmp_path / "mypolicy.py").write_text(
        "def policy(messages, request):\n    return 'echo: ' + messages[-1]['content'].upper()\n"
    )
    proc, url = start("--policy", "mypolicy:policy", cwd=tmp_path)
    try:
        reply = chat(url, "hello there")
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"] == "echo: HELLO THERE"
    finally:
        assert stop(proc) == 0


def test_scripted_server_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('"ok"\n{"nope": 1}\n')
    for args, words in (
        ([], "exactly one of"),
        (["--replies", str(bad)], "line 2"),
        (["--policy", "no_such_module_zz:f"], "cannot import"),
    ):
        proc = subprocess.run([*RLMX, "scripted-server", *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.splitlines()) == 1, (
            proc.stderr
        )


def test_chat_help_lists_the_slash_commands(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    with ScriptedServer(lambda m, r: "FINAL(hi)" if is_root(r) else "x") as srv:
        args = ["--context", str(tmp_path / "a.txt"), "--model", "openai:scripted", "--base-url", srv.url]
        proc = subprocess.run(
            [*RLMX, "chat", *args, "--no-trace", "--quiet"],
            input="/help\n/exit\n",
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "OPENAI_API_KEY": "test"},
        )
        assert srv.served == 0  # /help asks the model nothing
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["/context", "/usage", "/help", "/exit"]
    assert all(len(line.split()) > 2 for line in lines)  # each with a line saying what it does
    assert "unknown command" not in proc.stderr
