"""What `rlmx serve` adds on top of a run: per-request latency, time to the first progress chunk, and the
wall time of a burst through the run gate. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/serve_overhead.py [--requests 20] [--burst 8]

The model is the scripted server (one FINAL reply, or two turns with code), so the figures are the
harness's own cost: HTTP + JSON + the REPL worker start of each run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from policies import is_rlm, repl, turn  # noqa: E402
from rlmx import RLM, ModelOptions  # noqa: E402
from rlmx.testing import ScriptedServer, forbid_real_providers  # noqa: E402

TOKEN = "bench-token-0123456789"


def policy(messages: list[dict[str, Any]], request: Any) -> str:
    if not is_rlm(request):
        return "sub"
    if "two turns" in messages[1]["content"] and turn(messages) == 0:
        return repl("x = llm_query('hi')")
    return "FINAL(done)"


def start_serve(url: str, state: str, *extra: str) -> tuple[subprocess.Popen[str], str]:
    cmd = [
        sys.executable,
        "-m",
        "rlmx.cli",
        "serve",
        "--port",
        "0",
        "--model",
        "openai:scripted",
        "--base-url",
        url,
    ]
    env = {**os.environ, "RLMX_SERVE_TOKEN": TOKEN, "XDG_STATE_HOME": state}
    proc = subprocess.Popen(
        [*cmd, *extra], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        match = re.search(r"listening on (http://\S+/v1)", line)
        if match:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
            return proc, match.group(1)
    raise RuntimeError("rlmx serve did not start")


def timed(fn: Any, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def show(label: str, samples: list[float]) -> None:
    samples = sorted(samples)
    p90 = samples[min(len(samples) - 1, int(len(samples) * 0.9))]
    print(f"{label:<44} median {statistics.median(samples) * 1000:7.1f} ms   p90 {p90 * 1000:7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--burst", type=int, default=8)
    args = parser.parse_args()
    forbid_real_providers()
    state = tempfile.mkdtemp(prefix="rlmx-bench-serve-")
    with ScriptedServer(policy) as srv:
        rlm = RLM(
            "openai:scripted",
            model_options=ModelOptions(base_url=srv.url),
            trace=str(Path(state) / "d.jsonl"),
        )
        show("direct RLM.run, 1 turn", timed(lambda: rlm.run("one turn", "ctx"), args.requests))
        proc, url = start_serve(srv.url, state, "--max-running", "2", "--max-queued", str(args.burst))
        try:
            client = openai.OpenAI(base_url=url, api_key=TOKEN, max_retries=0)

            def ask(text: str) -> Any:
                return client.chat.completions.create(
                    model="rlmx/scripted", messages=[{"role": "user", "content": text}]
                )

            ask("warm up")
            show("rlmx serve, 1 turn (non-streamed)", timed(lambda: ask("one turn"), args.requests))
            show("rlmx serve, 2 turns + 1 sub-call", timed(lambda: ask("two turns"), args.requests))

            def first_progress() -> None:
                stream = client.chat.completions.create(
                    model="rlmx/scripted", messages=[{"role": "user", "content": "two turns"}], stream=True
                )
                for chunk in stream:
                    if (chunk.model_extra or {}).get("rlmx", {}).get("event") == "started":
                        break
                stream.close()

            show("streamed: request -> 'started' progress chunk", timed(first_progress, args.requests))

            async def burst() -> float:
                async_client = openai.AsyncOpenAI(base_url=url, api_key=TOKEN, max_retries=0)
                t0 = time.perf_counter()
                await asyncio.gather(
                    *(
                        async_client.chat.completions.create(
                            model="rlmx/scripted", messages=[{"role": "user", "content": "two turns"}]
                        )
                        for _ in range(args.burst)
                    )
                )
                await async_client.close()
                return time.perf_counter() - t0

            wall = asyncio.run(burst())
            print(f"burst of {args.burst} two-turn runs, --max-running 2: {wall * 1000:.0f} ms wall")
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
