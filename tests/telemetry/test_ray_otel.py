"""`rlmx batch --executor ray --otel`: the Ray workers export their items' spans as the driver does,
under the driver's batch span, with the OTLP headers the driver had; the headers travel sealed, so
their value is in none of Ray's logs. Starts a local Ray (CI's ray_cluster group)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from otel_support import IN_CI, need_sdk
from otlp_receiver import otlp_http_receiver

from rlmx.testing import ScriptedModel, ScriptedServer

pytestmark = pytest.mark.ray_cluster

RLMX = [sys.executable, "-m", "rlmx.cli"]


def test_ray_workers_export_under_the_batch_span(tmp_path: Path) -> None:
    need_sdk()
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        if IN_CI:
            pytest.fail(f"the ray extra is not installed: {exc}")
        pytest.skip(f"the ray extra is not installed: {exc}")
    secret = f"backend-key-{uuid.uuid4().hex}"
    items = tmp_path / "items.jsonl"
    rows = [{"id": f"i{n}", "question": "q", "context": {"text": f"context {n}"}} for n in range(2)]
    items.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ray_dir = Path(tempfile.mkdtemp(prefix="rlmxr", dir="/tmp"))  # Ray's socket paths must stay short
    try:
        check_ray_run(tmp_path, items, ray_dir, secret)
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)


def check_ray_run(tmp_path: Path, items: Path, ray_dir: Path, secret: str) -> None:
    with ScriptedServer(ScriptedModel(root=["FINAL(done)"])) as srv, otlp_http_receiver() as (endpoint, got):
        env = {
            **os.environ,
            "OPENAI_API_KEY": "sk-test-fake",
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_HEADERS": f"x-backend-key={secret}",
            "RAY_TMPDIR": str(ray_dir),
            "RAY_AUTH_MODE": "disabled",
        }
        args = ["--model", "openai:scripted", "--base-url", srv.url, "--allow-unknown-price", "--otel"]
        proc = subprocess.run(
            [*RLMX, "batch", str(items), "--out", str(tmp_path / "out.jsonl"), "--executor", "ray", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
    (batch,) = [s for s in got.spans if s.name == "rlmx batch"]
    item_spans = [s for s in got.spans if s.name == "rlmx batch item"]
    assert len(item_spans) == 2 and {s.parent_id for s in item_spans} == {batch.span_id}
    runs = [s for s in got.spans if s.name == "invoke_agent rlmx"]
    assert {r.parent_id for r in runs} == {s.span_id for s in item_spans}
    assert all(h.get("x-backend-key") == secret for h in got.headers)
    logs = [p for p in ray_dir.rglob("*") if p.is_file() and p.suffix in (".log", ".out", ".err", ".json")]
    assert logs, "Ray wrote no logs where RAY_TMPDIR says"
    assert not [str(p) for p in logs if secret in p.read_text(errors="replace")]
