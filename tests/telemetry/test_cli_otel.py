"""`--otel` and `[telemetry] otel = true` on the command line: the SDK exports the run's spans over
OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT when asked, flushed before the command exits; never when not
asked or under OTEL_SDK_DISABLED=true."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from otel_support import need_sdk
from otlp_receiver import otlp_http_receiver
from span_tree import check_mirrors, token_totals

from rlmx.testing import ScriptedModel, ScriptedServer
from rlmx.trace import read_records
from rlmx.trace.events import from_record

RLMX = [sys.executable, "-m", "rlmx.cli"]
MARKER = "ZQX-CLI-CONTEXT-5521"
CODE = "```repl\nprint(context[:40])\nanswer = llm_query('about ' + context[:40])\n```"


def ask(srv: ScriptedServer, tmp_path: Path, endpoint: str, *args: str, **env: str) -> dict[str, Any]:
    context = tmp_path / "context.txt"
    context.write_text(f"{MARKER} and some more text " * 20)
    full_env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-test-fake",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "60000",  # only the exit's flush sends the spans
        **env,
    }
    full_env.pop("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", None)
    model = ["--model", "openai:scripted", "--base-url", srv.url, "--allow-unknown-price"]
    trace = ["--json", "--trace", str(tmp_path / "run.jsonl"), "--context", str(context)]
    proc = subprocess.run(
        [*RLMX, "ask", *model, *trace, *args, "What is it?"],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


@pytest.fixture
def srv() -> Any:
    need_sdk()
    with ScriptedServer(ScriptedModel(root=[CODE, "FINAL_VAR(answer)"], sub="a summary")) as server:
        yield server


def test_ask_otel_exports_the_runs_spans(srv: ScriptedServer, tmp_path: Path) -> None:
    with otlp_http_receiver() as (endpoint, received):
        out = ask(srv, tmp_path, endpoint, "--otel")
    events = [from_record(r) for r in read_records(tmp_path / "run.jsonl")]
    check_mirrors(received.spans, events)
    assert token_totals(received.spans) == {
        "input_tokens": out["usage"]["input_tokens"],
        "output_tokens": out["usage"]["output_tokens"],
    }
    assert {r.get("service.name") for r in received.resources} == {"rlmx"}
    assert not [s.name for s in received.spans if MARKER in s.text()]


def test_the_config_key_and_the_service_name(srv: ScriptedServer, tmp_path: Path) -> None:
    (tmp_path / "rlmx.toml").write_text("[telemetry]\notel = true\n")
    with otlp_http_receiver() as (endpoint, received):
        ask(srv, tmp_path, endpoint, OTEL_SERVICE_NAME="my-pipeline")
    assert "invoke_agent rlmx" in {s.name for s in received.spans}
    assert {r.get("service.name") for r in received.resources} == {"my-pipeline"}


@pytest.mark.parametrize("case", ["not asked", "sdk disabled"])
def test_nothing_is_exported_unless_asked(srv: ScriptedServer, tmp_path: Path, case: str) -> None:
    with otlp_http_receiver() as (endpoint, received):
        if case == "not asked":
            out = ask(srv, tmp_path, endpoint)
        else:
            out = ask(srv, tmp_path, endpoint, "--otel", OTEL_SDK_DISABLED="true")
    assert out["stopped_by"] == "final"
    assert received.spans == []


def test_batch_otel_puts_the_items_under_the_batch(srv: ScriptedServer, tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    rows = [
        {"id": f"i{n}", "question": "What is it?", "context": {"text": f"{MARKER} {n}"}} for n in range(2)
    ]
    items.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-fake"}
    with otlp_http_receiver() as (endpoint, received):
        model = ["--model", "openai:scripted", "--base-url", srv.url, "--allow-unknown-price"]
        proc = subprocess.run(
            [*RLMX, "batch", str(items), "--out", str(tmp_path / "out.jsonl"), *model, "--otel", "--quiet"],
            capture_output=True,
            text=True,
            env={**env, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint},
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
    names = [s.name for s in received.spans]
    assert names.count("rlmx batch") == 1 and names.count("rlmx batch item") == 2
    assert names.count("invoke_agent rlmx") == 2
    batch = next(s for s in received.spans if s.name == "rlmx batch")
    assert {s.parent_id for s in received.spans if s.name == "rlmx batch item"} == {batch.span_id}
    assert not [s.name for s in received.spans if MARKER in s.text()]
