"""`rlmx serve` under pressure: a full queue answers 429; a client that goes away cancels its run and
its REPL worker process is gone."""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from rlmx.testing import ScriptedServer
from serve_helpers import TOKEN, Router, ServeProcess, alive, host_pid, rlmx_serve, wait_until


@pytest.fixture(scope="module")
def router() -> Router:
    return Router()


@pytest.fixture(scope="module")
def serve(router: Router, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    state = tmp_path_factory.mktemp("state")
    with ScriptedServer(router) as srv:
        args = [
            "--model",
            "openai:scripted",
            "--base-url",
            srv.url,
            "--max-running",
            "1",
            "--max-queued",
            "1",
        ]
        with rlmx_serve(*args, env={"XDG_STATE_HOME": str(state)}) as proc:
            yield proc


def client(serve: ServeProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=serve.url, api_key=TOKEN, max_retries=0, timeout=120)


def ask(serve: ServeProcess, text: str, **kw: Any) -> Any:
    return client(serve).chat.completions.create(
        model="rlmx/scripted", messages=[{"role": "user", "content": text}], **kw
    )


def test_queue_full_is_429_and_queued_runs_finish(serve: ServeProcess, router: Router) -> None:
    results: dict[str, Any] = {}
    running = threading.Thread(target=lambda: results.setdefault("a", ask(serve, "block until released")))
    running.start()
    assert router.blocked.wait(60)  # run A holds the only run slot
    queued = ask(serve, "say hello", stream=True)  # run B takes the only queue place
    chunks = iter(queued)
    assert next(chunks).model_extra["rlmx"]["event"] == "accepted"
    assert next(chunks).model_extra["rlmx"]["event"] == "queued"
    with pytest.raises(openai.RateLimitError) as info:
        ask(serve, "say hello")
    assert info.value.status_code == 429 and info.value.body["code"] == "server_busy"
    assert "1 running, 1 queued" in info.value.body["message"]
    assert info.value.response.headers["retry-after"] == "5"
    router.release.set()
    running.join(120)
    assert results["a"].choices[0].message.content == "released"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "hello from rlmx"
    assert ask(serve, "say hello").choices[0].message.content == "hello from rlmx"  # slots are free again


def sleeping_worker(serve: ServeProcess, router: Router) -> int:
    """Wait until the run's REPL sleeps in a cell; its worker's host pid (alive)."""
    assert router.sleeping.wait(60), "the scripted run never reached its sleeping cell"
    pid = host_pid(serve.proc.pid, router.pids[-1])
    assert pid is not None and alive(pid), "the REPL worker is not a live process below rlmx serve"
    return pid


def test_disconnect_mid_stream_cancels_the_run_and_kills_its_worker(
    serve: ServeProcess, router: Router
) -> None:
    router.sleeping.clear()
    stream = ask(serve, "report pid then sleep", stream=True)
    pid = sleeping_worker(serve, router)
    trace_id = stream.response.headers["x-rlmx-trace-id"]
    stream.close()  # the client goes away
    wait_until(lambda: not alive(pid), f"REPL worker {pid} to be killed after the client disconnected")
    assert ask(serve, "say hello").choices[0].message.content == "hello from rlmx"  # its run slot is free
    wait_until(lambda: f"{trace_id} POST /v1/chat/completions 200 " in serve.log(), "the request's log line")
    assert re.search(f"INFO rlmx serve: {trace_id} .* stopped_by=cancelled\n", serve.log())


def test_disconnect_without_streaming_cancels_the_run_too(serve: ServeProcess, router: Router) -> None:
    router.sleeping.clear()
    cancelled = serve.log().count(" stopped_by=cancelled\n")

    async def go() -> int:
        async_client = openai.AsyncOpenAI(base_url=serve.url, api_key=TOKEN, max_retries=0, timeout=120)
        request = asyncio.create_task(
            async_client.chat.completions.create(
                model="rlmx/scripted", messages=[{"role": "user", "content": "report pid then sleep"}]
            )
        )
        pid = await asyncio.to_thread(sleeping_worker, serve, router)
        request.cancel()  # the HTTP connection is closed under the pending request
        with contextlib.suppress(asyncio.CancelledError):
            await request
        await async_client.close()
        return pid

    pid = asyncio.run(go())
    wait_until(lambda: not alive(pid), f"REPL worker {pid} to be killed after the client disconnected")
    assert ask(serve, "say hello").choices[0].message.content == "hello from rlmx"
    wait_until(
        lambda: serve.log().count(" stopped_by=cancelled\n") > cancelled, "the cancelled run's log line"
    )
