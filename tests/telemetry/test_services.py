"""Telemetry where runs are served and batched: `rlmx serve` continues the caller's `traceparent`; a
batch's items hang under the batch's span, each run under its item; the config's `[telemetry]` table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from span_tree import from_sdk

import rlmx.batch
from rlmx import RLM, ConfigError, ModelOptions
from rlmx.config import load_config
from rlmx.testing import ScriptedModel, ScriptedServer

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


def test_serve_continues_the_callers_traceparent(exporter: Any, tmp_path: Path) -> None:
    from rlmx.serve.app import create_app
    from rlmx.serve.profiles import ServedProfile
    from rlmx.serve.settings import ServeSettings
    from rlmx.spec.options import RunOptions
    from serve_helpers import TOKEN, app_in_thread

    model = ScriptedModel(root=["FINAL(served)"])
    with ScriptedServer(model) as srv:
        profile = ServedProfile("scripted", RunOptions(model="openai:scripted", base_url=srv.url))
        profile.prepare()
        settings = ServeSettings(profiles={"scripted": profile}, token=TOKEN, trace_dir=tmp_path)
        with app_in_thread(create_app(settings)) as url:
            body = {"model": "rlmx/scripted", "messages": [{"role": "user", "content": "hello"}]}
            headers = {"authorization": f"Bearer {TOKEN}", "traceparent": f"00-{TRACE_ID}-{CALLER_SPAN}-01"}
            reply = httpx.post(f"{url}/chat/completions", json=body, headers=headers, timeout=60)
            assert reply.status_code == 200, reply.text
            plain = httpx.post(
                f"{url}/chat/completions", json=body, headers={"authorization": f"Bearer {TOKEN}"}, timeout=60
            )
            assert plain.status_code == 200, plain.text
    runs = [s for s in from_sdk(exporter.get_finished_spans()) if s.name == "invoke_agent rlmx"]
    assert len(runs) == 2
    continued = next(s for s in runs if s.trace_id == TRACE_ID)
    assert continued.parent_id == CALLER_SPAN
    assert continued.attributes["rlmx.run_id"] == reply.headers["x-rlmx-trace-id"]
    fresh = next(s for s in runs if s is not continued)
    assert fresh.parent_id is None and fresh.trace_id != TRACE_ID


def test_batch_items_hang_under_the_batch_span(exporter: Any) -> None:
    model = ScriptedModel(root=["FINAL(done)"])
    items = [
        {"id": f"item-{n}", "question": f"question {n}", "context": {"text": f"context {n}"}}
        for n in range(3)
    ]
    with ScriptedServer(model) as srv:
        rlm = RLM("openai:scripted", model_options=ModelOptions(base_url=srv.url), trace=False)
        lines = list(rlmx.batch.run(items, rlm, concurrency=2))
    assert sorted(line["stopped_by"] for line in lines) == ["final"] * 3
    spans = from_sdk(exporter.get_finished_spans())
    ids = {s.span_id: s for s in spans}
    (batch,) = [s for s in spans if s.name == "rlmx batch"]
    assert batch.parent_id is None
    assert batch.attributes["rlmx.batch.items"] == 3 and batch.attributes["rlmx.batch.ran"] == 3
    item_spans = [s for s in spans if s.name == "rlmx batch item"]
    assert sorted(s.attributes["rlmx.batch.item_id"] for s in item_spans) == ["item-0", "item-1", "item-2"]
    assert all(s.parent_id == batch.span_id and s.trace_id == batch.trace_id for s in item_spans)
    runs = [s for s in spans if s.name == "invoke_agent rlmx"]
    assert len(runs) == 3
    assert {ids[str(r.parent_id)].name for r in runs} == {"rlmx batch item"}
    assert len({r.parent_id for r in runs}) == 3  # one run under each item


def test_the_config_telemetry_table(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text("[telemetry]\notel = true\ncapture_content = false\n")
    assert load_config(good).telemetry == {"otel": True, "capture_content": False}
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[telemetry]\nendpoint = 'http://x'\n")
    with pytest.raises(ConfigError, match=r"unknown key 'endpoint' in \[telemetry\]"):
        load_config(unknown)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('[telemetry]\notel = "yes"\n')
    with pytest.raises(ConfigError, match=r"\[telemetry\] otel must be true or false"):
        load_config(wrong)


def test_the_sdk_set_up_honours_its_variables() -> None:
    from rlmx.telemetry import sdk

    assert sdk.start({"OTEL_SDK_DISABLED": "true"}) is False and not sdk.started()
    assert sdk.start({"OTEL_TRACES_EXPORTER": "none"}) is False and not sdk.started()
    assert type(sdk.exporter({"OTEL_TRACES_EXPORTER": "console"})).__name__ == "ConsoleSpanExporter"
    assert type(sdk.exporter({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})).__module__.endswith(
        "grpc.trace_exporter"
    )
    with pytest.raises(ConfigError, match="OTEL_TRACES_EXPORTER=zipkin is not one rlmx exports with"):
        sdk.exporter({"OTEL_TRACES_EXPORTER": "zipkin"})
    assert sdk.protocol({}) == "http/protobuf"
    assert sdk.protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) == "grpc"
    assert (
        sdk.protocol(
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}
        )
        == "http/protobuf"
    )
    with pytest.raises(
        ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL=http/json is not one rlmx exports with"
    ):
        sdk.protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})


def test_export_env_takes_only_the_opentelemetry_variables() -> None:
    from rlmx.telemetry import export_env

    env = {
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer k",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
        "OTEL_SERVICE_NAME": "mine",
        "OPENAI_API_KEY": "sk-x",
        "HOME": "/root",
    }
    assert export_env(env) == {k: v for k, v in env.items() if k.startswith("OTEL_")}


def test_a_batch_that_exports_ships_the_otlp_variables_sealed(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the ray executor sends its workers: the OpenTelemetry variables join the model keys in
    `Plan.env` (sealed before they travel), and the workers are told to export."""
    from rlmx.batch.ray_executor import seal, unseal
    from rlmx.telemetry import sdk

    secret = "authorization=Basic c2VjcmV0LWJhY2tlbmQta2V5"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", secret)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    monkeypatch.setattr(sdk, "started", lambda: True)
    items = [{"id": "a", "question": "q", "context": {"text": "c"}}]
    batch = rlmx.batch.run(
        items, RLM("openai:scripted", model_options=ModelOptions(base_url="http://127.0.0.1:9/v1"))
    )
    assert batch.plan.otel_export is True
    assert batch.plan.env["OTEL_EXPORTER_OTLP_HEADERS"] == secret
    sealed, pad = seal(batch.plan.env)
    assert secret not in sealed and "c2VjcmV0" not in sealed
    assert unseal(sealed, pad)["OTEL_EXPORTER_OTLP_HEADERS"] == secret
    monkeypatch.setattr(sdk, "started", lambda: False)
    quiet = rlmx.batch.run(
        items, RLM("openai:scripted", model_options=ModelOptions(base_url="http://127.0.0.1:9/v1"))
    )
    assert quiet.plan.otel_export is False and "OTEL_EXPORTER_OTLP_HEADERS" not in quiet.plan.env
