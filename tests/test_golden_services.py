"""Golden snapshots of `rlmx batch` (result lines, summary lines) and `rlmx serve` (/v1/models, a
completion, a streamed completion's chunks), against the scripted server. See tests/test_golden.py for
the files and how to rewrite them (RLMX_UPDATE_GOLDEN=1)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest

from batch_support import make_ticket_items, read_jsonl, write_jsonl
from golden_support import check_json, check_text, normalise, plain
from policies import tickets_policy
from rlmx.testing import ScriptedServer
from serve_helpers import TOKEN, Router, ServeProcess, rlmx_serve

RLMX = [sys.executable, "-m", "rlmx.cli"]
TERMINAL = {"COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"}


# --- rlmx batch ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def batched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Three ticket items through `rlmx batch` (local executor, one at a time): result lines, stderr."""
    tmp = tmp_path_factory.mktemp("batch")
    items, gold = make_ticket_items(tmp / "data", n=3)
    source, out, traces = tmp / "items.jsonl", tmp / "results.jsonl", tmp / "traces"
    write_jsonl(source, items)
    env = {**os.environ, **TERMINAL, "OPENAI_API_KEY": "sk-test-fake", "XDG_STATE_HOME": str(tmp / "state")}
    with ScriptedServer(tickets_policy) as srv:
        args = ["batch", str(source), "--out", str(out), "--trace-dir", str(traces), "--concurrency", "1"]
        args += ["--model", "openai:scripted", "--base-url", srv.url]
        proc = subprocess.run([*RLMX, *args], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = sorted(read_jsonl(out), key=lambda row: str(row["id"]))
    subs = {str(tmp): "<tmp>", socket.gethostname(): "<host>"}
    for row in rows:  # each trace's file name carries its run id
        run_id = Path(row["trace_path"]).name.split(".")[2]
        subs[run_id] = "<run_id>"
    return {"rows": rows, "gold": gold, "stderr": proc.stderr, "stdout": proc.stdout, "subs": subs}


def test_batch_result_lines(batched: dict[str, Any]) -> None:
    rows = batched["rows"]
    assert [row["id"] for row in rows] == sorted(batched["gold"])
    assert all(row["answer"] == batched["gold"][row["id"]] for row in rows)
    check_json("batch/results.json", normalise(rows, subs=batched["subs"]))


def test_batch_summary_lines(batched: dict[str, Any]) -> None:
    """stdout stays empty; stderr: a line a finished item, then the summary (timings, token counts and
    the running count, which depends on timing, as placeholders)."""
    assert batched["stdout"] == ""
    numbers = [
        (re.compile(r"ETA [^,;\n]+"), "ETA <eta>"),
        (re.compile(r"\d+ running"), "<n> running"),
        (re.compile(r"[\d,]+ tokens"), "<n> tokens"),
        (re.compile(r"[\d.]+ s wall"), "<n> s wall"),
        (re.compile(r"[\d.]+ items/min"), "<n> items/min"),
    ]
    text = batched["stderr"]
    for pattern, placeholder in numbers:
        text = pattern.sub(placeholder, text)
    check_text("batch/stderr.txt", plain(text))


# --- rlmx serve ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(Router()) as srv:
        yield srv


class Served(NamedTuple):
    proc: ServeProcess
    subs: dict[str, str]  # what varies between runs -> its placeholder


@pytest.fixture(scope="module")
def serve(model_server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    state = tmp_path_factory.mktemp("serve-state")
    args = ["--model", "openai:scripted", "--base-url", model_server.url]
    with rlmx_serve(*args, env={"XDG_STATE_HOME": str(state)}) as proc:
        yield Served(proc, {str(state): "<state>", proc.url: "<serve>", model_server.url: "<model-server>"})


def http(serve: Served) -> httpx.Client:
    return httpx.Client(base_url=serve.proc.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)


def chat(serve: Served, text: str, **extra: Any) -> httpx.Response:
    body = {"model": "rlmx/scripted", "messages": [{"role": "user", "content": text}], **extra}
    with http(serve) as client:
        return client.post("/chat/completions", json=body)


def with_run_id(serve: Served, run_id: str) -> dict[str, str]:
    return {**serve.subs, run_id: "<run_id>"}


def test_serve_models(serve: Served) -> None:
    with http(serve) as client:
        response = client.get("/models")
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    check_json("serve/models.json", normalise(response.json(), subs=serve.subs))


def test_serve_completion(serve: Served) -> None:
    response = chat(serve, "please say hello")
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    body = response.json()
    run_id = body["rlmx"]["trace_id"]
    assert response.headers["x-rlmx-trace-id"] == run_id
    assert body["choices"][0]["message"]["content"] == "hello from rlmx"
    check_json("serve/completion.json", normalise(body, subs=with_run_id(serve, run_id)))


def test_serve_stream_chunks(serve: Served) -> None:
    response = chat(serve, "work in steps", stream=True, stream_options={"include_usage": True})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    run_id = chunks[0]["rlmx"]["trace_id"]
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert content == "sub:1+sub:2+sub:3"
    check_json("serve/stream.json", [*normalise(chunks, subs=with_run_id(serve, run_id)), "[DONE]"])
