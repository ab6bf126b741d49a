"""Against a real OTLP receiver: Arize Phoenix 20.26.1 (benchmarks/.venvs/phoenix, made by
benchmarks/peers/setup.py on first use), started here on free loopback ports. `rlmx ask --otel` over
OTLP/HTTP and over gRPC, and `rlmx serve --otel` continuing a caller's traceparent: the spans Phoenix
stored (read back through its REST API) mirror the run's trace, their token totals equal the run's
usage, and no context text is in them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from otel_support import IN_CI, need_sdk
from span_tree import Span, check_mirrors, expected_count, token_totals

from rlmx.testing import ScriptedModel, ScriptedServer
from rlmx.trace import read_records
from rlmx.trace.events import from_record

pytestmark = pytest.mark.peers

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "benchmarks" / "peers" / "setup.py"
PHOENIX = ROOT / "benchmarks" / ".venvs" / "phoenix" / "bin" / "phoenix"
RLMX = [sys.executable, "-m", "rlmx.cli"]
MARKER = "ZQX-PHOENIX-CONTEXT-0917"
CODE = "```repl\nprint(context[:40])\nanswer = llm_query('about ' + context[:40])\n```"


@dataclass
class Phoenix:
    http: str  # the UI, the REST API and OTLP/HTTP (/v1/traces)
    grpc: str  # OTLP/gRPC

    def spans(self, project: str, expected: int, timeout: float = 60) -> list[Span]:
        """The project's spans once `expected` of them are stored (ingestion is asynchronous)."""
        deadline = time.monotonic() + timeout
        found: list[Span] = []
        while time.monotonic() < deadline:
            reply = httpx.get(f"{self.http}/v1/projects/{project}/spans", params={"limit": 1000}, timeout=30)
            if reply.status_code == 200:
                found = [as_span(row) for row in reply.json()["data"]]
                if len(found) >= expected:
                    return found
            time.sleep(0.5)
        names = sorted(s.name for s in found)
        raise AssertionError(
            f"Phoenix holds {len(found)} spans of project {project}, expected {expected}: {names}"
        )


def as_span(row: dict[str, Any]) -> Span:
    return Span(
        name=row["name"],
        span_id=row["context"]["span_id"],
        parent_id=row.get("parent_id"),
        trace_id=row["context"]["trace_id"],
        attributes=dict(row.get("attributes") or {}),
        events=list(row.get("events") or []),
        status=row.get("status_code", ""),
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    need_sdk()
    made = subprocess.run(
        [sys.executable, str(SETUP), "phoenix"], capture_output=True, text=True, timeout=1800
    )
    if made.returncode != 0 or not PHOENIX.exists():
        why = f"could not create the Phoenix environment with {SETUP}: {(made.stdout + made.stderr)[-400:]}"
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why)
    http_port, grpc_port = free_port(), free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(tmp_path_factory.mktemp("phoenix")),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(http_port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = tmp_path_factory.mktemp("phoenix-log") / "phoenix.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(PHOENIX), "serve"], stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{http_port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail(f"Phoenix did not start: {log.read_text()[-1000:]}")
        yield Phoenix(http=url, grpc=f"http://127.0.0.1:{grpc_port}")
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedServer]:
    with ScriptedServer(ScriptedModel(root=[CODE, "FINAL_VAR(answer)"], sub="a summary")) as srv:
        yield srv


def otel_env(endpoint: str, project: str, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return {
        **env,
        "OPENAI_API_KEY": "sk-test-fake",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
        **more,
    }


def context_file(tmp_path: Path) -> Path:
    path = tmp_path / "context.txt"
    path.write_text(f"{MARKER} and some more text " * 20)
    return path


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_ask_otel_reaches_phoenix(
    phoenix: Phoenix, model: ScriptedServer, tmp_path: Path, protocol: str
) -> None:
    project = f"rlmx-ask-{uuid.uuid4().hex[:8]}"
    endpoint = phoenix.grpc if protocol == "grpc" else phoenix.http
    trace = tmp_path / "run.jsonl"
    model_args = ["--model", "openai:scripted", "--base-url", model.url, "--allow-unknown-price", "--otel"]
    run_args = ["--json", "--trace", str(trace), "--context", str(context_file(tmp_path)), "What is it?"]
    proc = subprocess.run(
        [*RLMX, "ask", *model_args, *run_args],
        capture_output=True,
        text=True,
        env=otel_env(endpoint, project, OTEL_EXPORTER_OTLP_PROTOCOL=protocol),
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    usage = json.loads(proc.stdout)["usage"]
    events = [from_record(r) for r in read_records(trace)]
    expected = expected_count(events)
    assert expected == 1 + 2 + 3 + 1  # the run, two turns, three model calls (one a sub-call), one cell
    spans = phoenix.spans(project, expected)
    assert len(spans) == expected
    run = check_mirrors(spans, events)
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["rlmx.stop_reason"] == "final"
    assert token_totals(spans) == {
        "input_tokens": usage["input_tokens"],
        "output_tokens": usage["output_tokens"],
    }
    assert not [s.name for s in spans if MARKER in s.text()]


def test_serve_otel_continues_the_callers_trace_in_phoenix(
    phoenix: Phoenix, model: ScriptedServer, tmp_path: Path
) -> None:
    from serve_helpers import TOKEN, rlmx_serve

    project = f"rlmx-serve-{uuid.uuid4().hex[:8]}"
    trace_id, caller = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    args = ["--model", "openai:scripted", "--base-url", model.url, "--otel", "--trace-dir", str(tmp_path)]
    env = otel_env(phoenix.http, project, OTEL_BSP_SCHEDULE_DELAY="200")
    with rlmx_serve(*args, env=env) as served:
        body = {"model": "rlmx/scripted", "messages": [{"role": "user", "content": f"What is it? {MARKER}"}]}
        headers = {"authorization": f"Bearer {TOKEN}", "traceparent": f"00-{trace_id}-{caller}-01"}
        reply = httpx.post(f"{served.url}/chat/completions", json=body, headers=headers, timeout=120)
        assert reply.status_code == 200, reply.text
        events = [from_record(r) for r in read_records(next(tmp_path.glob("*.jsonl")))]
        spans = phoenix.spans(project, expected_count(events))
    assert len(spans) == expected_count(events)
    run = next(s for s in spans if s.name == "invoke_agent rlmx")
    assert run.trace_id == trace_id and run.parent_id == caller
    assert run.attributes["rlmx.run_id"] == reply.headers["x-rlmx-trace-id"]
    check_mirrors(spans, events, parent_id=caller)
    assert not [s.name for s in spans if MARKER in s.text()]  # the question is prompt text: opt-in only
