"""`rlmx serve` as a real process, driven by the official `openai` client, backed by the scripted model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

from policies import is_root
from rlmx.testing import ScriptedServer
from serve_helpers import BIG, TOKEN, Router, ServeProcess, rlmx_serve


class Tally(BaseModel):
    label: str
    count: int


@pytest.fixture(scope="module")
def router() -> Router:
    return Router()


@pytest.fixture(scope="module")
def model_server(router: Router) -> Iterator[ScriptedServer]:
    with ScriptedServer(router) as srv:
        yield srv


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("serve")
    root = base / "root"
    (root / "notes" / "deeper").mkdir(parents=True)
    (root / "notes" / "a.txt").write_text("alpha " * 10)
    (root / "notes" / "deeper" / "b.md").write_text("beta " * 20)
    (root / "notes" / ".hidden").write_text("not read")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the secret")
    (root / "notes" / "escape.txt").symlink_to(outside / "secret.txt")  # a link out: skipped in folders
    (root / "link-out").symlink_to(outside)  # named directly: refused
    return {"root": root, "outside": outside, "state": base / "state"}


@pytest.fixture(scope="module")
def serve(model_server: ScriptedServer, roots: dict[str, Path]) -> Iterator[ServeProcess]:
    args = ["--model", "openai:scripted", "--base-url", model_server.url, "--root", str(roots["root"])]
    args += ["--max-request-bytes", "1000000", "--max-running", "2", "--max-queued", "2"]
    with rlmx_serve(*args, env={"XDG_STATE_HOME": str(roots["state"])}) as proc:
        yield proc


def client(serve: ServeProcess, token: str = TOKEN) -> openai.OpenAI:
    return openai.OpenAI(base_url=serve.url, api_key=token, max_retries=0, timeout=120)


def ask(serve: ServeProcess, text: str, **kw: Any) -> Any:
    return client(serve).chat.completions.create(
        model="rlmx/scripted", messages=[{"role": "user", "content": text}], **kw
    )


def test_models_lists_the_profiles(serve: ServeProcess) -> None:
    models = client(serve).models.list()
    assert [m.id for m in models.data] == ["rlmx/scripted"]
    assert models.data[0].model_extra["rlmx"]["model"] == "openai:scripted"


def test_plain_completion_with_usage_and_trace_id(serve: ServeProcess, model_server: ScriptedServer) -> None:
    before = model_server.usage_served
    raw = client(serve).chat.completions.with_raw_response.create(
        model="rlmx/scripted", messages=[{"role": "user", "content": "please say hello"}]
    )
    completion = raw.parse()
    after = model_server.usage_served
    assert completion.choices[0].message.content == "hello from rlmx"
    assert completion.choices[0].finish_reason == "stop"
    info = completion.model_extra["rlmx"]
    assert (
        raw.headers["x-rlmx-trace-id"] == info["trace_id"] and completion.id == f"chatcmpl-{info['trace_id']}"
    )
    assert completion.usage.prompt_tokens == after["input_tokens"] - before["input_tokens"] > 0
    assert completion.usage.completion_tokens == after["output_tokens"] - before["output_tokens"] > 0
    trace = Path(info["trace_path"])
    assert trace.exists() and info["trace_id"] in trace.name
    assert json.loads(trace.read_text().splitlines()[0])["run_id"] == info["trace_id"]


def test_streaming_sends_progress_then_the_answer(serve: ServeProcess) -> None:
    stream = ask(serve, "work in steps", stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    progress = [c.model_extra["rlmx"] for c in chunks if c.choices and c.model_extra.get("rlmx")]
    events = [p.get("event") for p in progress]
    assert events[0] == "accepted" and "started" in events and "done" in events
    turns = [p for p in progress if p.get("event") == "turn"]
    assert [p["turn"] for p in turns] == [1, 2, 3]
    assert turns[-1]["sub_calls"] == 3  # the batched sub-calls show up before the answer
    for c in chunks:  # progress chunks carry no content
        if c.choices and c.model_extra.get("rlmx", {}).get("event") not in (None, "accepted"):
            assert not c.choices[0].delta.content
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "sub:1+sub:2+sub:3"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    usage_chunks = [c for c in chunks if not c.choices]
    assert len(usage_chunks) == 1 and usage_chunks[0].usage.total_tokens > 0
    assert usage_chunks[0].usage.total_tokens == sum(
        c.model_extra["rlmx"]["usage"]["input_tokens"] + c.model_extra["rlmx"]["usage"]["output_tokens"]
        for c in chunks
        if c.choices and c.choices[0].finish_reason
    )


def test_long_message_parts_become_context_the_root_model_never_sees(
    serve: ServeProcess, model_server: ScriptedServer
) -> None:
    model_server.reset()
    messages: list[Any] = [
        {"role": "system", "content": "You are terse."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "list the documents"}, {"type": "text", "text": BIG}],
        },
    ]
    completion = client(serve).chat.completions.create(model="rlmx/scripted", messages=messages)
    assert json.loads(completion.choices[0].message.content) == {"single": len(BIG)}  # one part: a str
    root_requests = [r for r in model_server.requests if is_root(r)]
    assert root_requests and all(BIG[:2000] not in json.dumps(r.messages) for r in root_requests)
    assert (
        "[system] You are terse." in root_requests[0].messages[1]["content"]
    )  # the short transcript travels


def test_a_long_single_text_keeps_its_last_line_as_the_question(serve: ServeProcess) -> None:
    completion = ask(serve, BIG + "\n\nlist the documents")
    assert json.loads(completion.choices[0].message.content) == {"single": len(BIG)}


def test_extra_body_paths_and_inline_text(serve: ServeProcess) -> None:
    completion = client(serve).chat.completions.create(
        model="rlmx/scripted",
        messages=[{"role": "user", "content": "list the documents"}],
        extra_body={"rlmx": {"paths": ["notes"], "text": "inline words"}},
    )
    sizes = json.loads(completion.choices[0].message.content)
    # hidden files and the link out of the root are not read
    assert sizes == {"text": 12, "notes/a.txt": 60, "notes/deeper/b.md": 100}


def test_typed_output_via_response_format(serve: ServeProcess) -> None:
    completion = client(serve).chat.completions.parse(
        model="rlmx/scripted",
        messages=[{"role": "user", "content": "make a tally"}],
        response_format=Tally,
    )
    assert completion.choices[0].message.parsed == Tally(label="billing", count=3)
    assert completion.model_extra["rlmx"]["iterations"] == 2  # one correction round


def test_typed_output_that_never_validates_is_a_422_with_the_raw_answer(serve: ServeProcess) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as info:
        client(serve).chat.completions.parse(
            model="rlmx/scripted",
            messages=[{"role": "user", "content": "never valid"}],
            response_format=Tally,
        )
    error = info.value.body
    assert error["code"] == "output_validation_failed"
    assert (
        "did not match the output schema" in error["message"] and "last raw answer: nope" in error["message"]
    )


def test_bad_or_missing_token_is_401(serve: ServeProcess) -> None:
    with pytest.raises(openai.AuthenticationError) as info:
        client(serve, token="wrong-token").chat.completions.create(
            model="rlmx/scripted", messages=[{"role": "user", "content": "say hello"}]
        )
    assert info.value.status_code == 401 and info.value.body["type"] == "authentication_error"
    bare = httpx.get(serve.url + "/models")
    assert bare.status_code == 401 and bare.json()["error"]["code"] == "invalid_api_key"


def test_oversize_request_is_413(serve: ServeProcess) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        ask(serve, "x" * 1_500_000)
    assert info.value.status_code == 413 and info.value.body["code"] == "request_too_large"


@pytest.mark.parametrize(
    ("path", "status"),
    [("../outside/secret.txt", 400), ("link-out/secret.txt", 403), ("OUTSIDE", 403), ("nope.txt", 404)],
)
def test_paths_outside_the_roots_are_refused(
    serve: ServeProcess, roots: dict[str, Path], path: str, status: int
) -> None:
    path = path.replace("OUTSIDE", str(roots["outside"] / "secret.txt"))
    with pytest.raises(openai.APIStatusError) as info:
        ask(serve, "list the documents", extra_body={"rlmx": {"paths": [path]}})
    assert info.value.status_code == status
    assert info.value.body["param"] == "rlmx.paths" and "secret" not in info.value.body["message"].replace(
        path, ""
    )


def test_unknown_model_and_bad_requests(serve: ServeProcess) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client(serve).chat.completions.create(model="rlmx/nope", messages=[{"role": "user", "content": "hi"}])
    assert info.value.body["code"] == "model_not_found" and "rlmx/scripted" in info.value.body["message"]
    with pytest.raises(openai.BadRequestError) as bad:
        ask(serve, "hi", extra_body={"rlmx": {"max_dept": 1}})
    assert "unknown rlmx option(s) max_dept" in bad.value.body["message"]
    with pytest.raises(openai.BadRequestError, match="no user message"):
        client(serve).chat.completions.create(
            model="rlmx/scripted", messages=[{"role": "system", "content": "x"}]
        )


def test_connections_to_the_bound_socket_get_tcp_nodelay() -> None:
    """asyncio sets TCP_NODELAY on a server's connections only when the listening socket names
    IPPROTO_TCP; without it each reply on a kept-alive connection waited ~40 ms (Nagle + delayed ACK)."""
    import socket

    from rlmx.serve.server import bind

    async def accepted_nodelay() -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        listener = bind("127.0.0.1", 0)
        server = await asyncio.start_server(on_connect, sock=listener)
        _, writer = await asyncio.open_connection(*listener.getsockname())
        value = await asyncio.wait_for(seen, 10)
        writer.close()
        server.close()
        await server.wait_closed()
        return value

    assert asyncio.run(accepted_nodelay()) == 1
