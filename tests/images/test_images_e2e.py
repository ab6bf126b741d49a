"""Images end to end: a folder of pictures as the context, cells that show them to a vision sub-model,
behind a real OpenAI-compatible (and Anthropic) HTTP server on 127.0.0.1 (ScriptedServer). The requests
are checked against the SDKs' own request types (pydantic validation of their TypedDicts)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import anthropic.types
import openai.types.chat
import pytest
from pydantic import TypeAdapter

from images.support import picture, picture_folder
from rlmx import RLM
from rlmx.context import Context
from rlmx.limits import Limits
from rlmx.lm.options import ModelOptions
from rlmx.lm.registry import resolve_model
from rlmx.pricing import Price, Pricing
from rlmx.sandbox.base import SandboxSettings
from rlmx.testing import ScriptedModel, ScriptedServer

MADE = picture("PNG", (10, 12), "black")  # bytes a cell made (a crop, say), sent over the typed wire
CELL = f"""```repl
by = {{d["path"]: d for d in context if d.get("image")}}
print(len(by), sorted(d["image"]["format"] for d in by.values()))
one = llm_query("read the receipt", images=[by["scans/receipt.png"], "scans/photo.jpg", {MADE!r}], detail="high")
two = llm_query_batched(["a", "b"], images=[[by["anim.gif"]], [by["icon.webp"], by["scans/receipt.png"]]])
print(one, two, vision_query("again", [by["scans/receipt.png"]]))
```"""
TEXT_ONLY_CELL = '```repl\nprint(llm_query("x", images=[context[0]]))\n```'

OPENAI_USER = TypeAdapter(openai.types.chat.ChatCompletionUserMessageParam)
ANTHROPIC_MESSAGE = TypeAdapter(anthropic.types.MessageParam)


def sandbox(backend: str = "process-unisolated") -> SandboxSettings:
    return SandboxSettings(backend)  # by default a real worker process: images cross the wire


def vision_calls(srv: ScriptedServer) -> list[Any]:
    return [r for r in srv.requests if r.headers.get("x-rlmx-purpose") == "llm_query"]


def run(
    tmp_path: Path, provider: str, backend: str = "process-unisolated", **options: Any
) -> tuple[Any, list[Any], dict[str, bytes], Path]:
    files = picture_folder(tmp_path / "pics")
    script = ScriptedModel(root=[CELL, "FINAL(done)"], sub="seen")
    trace = tmp_path / "run.jsonl"
    with ScriptedServer(script) as srv:
        base = srv.base_url if provider == "anthropic" else srv.url
        model = "litellm:openai/scripted" if provider == "litellm" else f"{provider}:scripted"
        root = resolve_model(model, ModelOptions(base_url=base, api_key="k"))
        sub = resolve_model(model, ModelOptions(base_url=base, api_key="k", vision=True))
        rlm = RLM(root, sub_model=sub, trace=trace, sandbox=sandbox(backend), **options)
        result = rlm.run("which receipts?", Context.from_paths([tmp_path / "pics"]))
        requests = list(srv.requests)
    return result, requests, files, trace


def no_base64_anywhere(requests: list[Any], files: dict[str, bytes], trace: Path) -> None:
    encoded = [base64.b64encode(data).decode()[:40] for data in [*files.values(), MADE]]
    roots = [r for r in requests if r.headers.get("x-rlmx-purpose") == "root"]
    assert roots, "no root request"
    text = trace.read_text()
    for needle in encoded:
        assert needle not in text  # the trace
        for r in roots:  # the root prompts, whose messages are the history
            assert needle not in str(r.body)
    assert "scans/receipt.png (png, 640x480," in text  # the trace names the images and sizes


@pytest.mark.parametrize(
    ("provider", "backend"),
    [
        ("openai", "process-unisolated"),
        ("openai", "local"),
        ("gemini", "process-unisolated"),
        ("litellm", "process-unisolated"),
    ],
)
def test_openai_compatible_requests_carry_each_file_s_exact_bytes(
    tmp_path: Path, provider: str, backend: str
) -> None:
    """OpenAI-compatible endpoints (Gemini's included) and LiteLLM get `image_url` data-URL parts; the
    bytes a cell made cross a worker's pipe as an attachment, or the call in a local REPL."""
    result, requests, files, trace = run(tmp_path, provider, backend)
    assert result.answer == "done", result.error
    calls = [r for r in requests if r.headers.get("x-rlmx-purpose") == "llm_query"]
    assert len(calls) == 4
    sent: list[list[tuple[str, bytes, str | None]]] = []
    for r in calls:
        (message,) = r.body["messages"]
        OPENAI_USER.validate_python(message)  # the SDK's own request type
        parts = [p for p in message["content"] if p["type"] == "image_url"]
        decoded = []
        for p in parts:
            head, _, body = p["image_url"]["url"].partition(",")
            decoded.append((head, base64.b64decode(body), p["image_url"].get("detail")))
        sent.append(decoded)
    by_first = {s[0][1]: s for s in sent}
    receipt = files["scans/receipt.png"]
    first = next(s for s in sent if len(s) == 3)
    assert first == [
        ("data:image/png;base64", receipt, "high"),
        ("data:image/jpeg;base64", files["scans/photo.jpg"], "high"),
        ("data:image/png;base64", MADE, "high"),
    ]
    assert by_first[files["anim.gif"]] == [("data:image/gif;base64", files["anim.gif"], None)]
    pair = by_first[files["icon.webp"]]
    assert [h for h, _, _ in pair] == ["data:image/webp;base64", "data:image/png;base64"]
    no_base64_anywhere(requests, files, trace)


def test_anthropic_requests_carry_image_blocks(tmp_path: Path) -> None:
    result, requests, files, trace = run(tmp_path, "anthropic")
    assert result.answer == "done", result.error
    calls = [r for r in requests if r.headers.get("x-rlmx-purpose") == "llm_query"]
    assert {r.api for r in calls} == {"anthropic"} and len(calls) == 4
    first = next(r for r in calls if len(r.body["messages"][0]["content"]) == 4)
    (message,) = first.body["messages"]
    ANTHROPIC_MESSAGE.validate_python(message)  # the SDK's own request type
    text, *images = message["content"]
    assert text == {"type": "text", "text": "read the receipt"}
    assert [(b["source"]["media_type"], base64.b64decode(b["source"]["data"])) for b in images] == [
        ("image/png", files["scans/receipt.png"]),
        ("image/jpeg", files["scans/photo.jpg"]),
        ("image/png", MADE),
    ]
    assert all(b["type"] == "image" and b["source"]["type"] == "base64" for b in images)
    no_base64_anywhere(requests, files, trace)


@pytest.mark.parametrize(
    ("sub_name", "vision", "said"),
    [
        ("gpt-3.5-turbo", None, "it is a text-only model"),
        ("scripted", False, "it is declared text-only"),
        ("scripted", None, "declare it with vision=True"),
    ],
)
def test_a_model_that_cannot_see_is_refused_in_the_cell_before_any_request(
    tmp_path: Path, sub_name: str, vision: bool | None, said: str
) -> None:
    picture_folder(tmp_path / "pics")
    script = ScriptedModel(root=[TEXT_ONLY_CELL, "FINAL(done)"], sub="seen")
    with ScriptedServer(script, models=("scripted", "gpt-3.5-turbo")) as srv:
        root = resolve_model("openai:scripted", ModelOptions(base_url=srv.url, api_key="k"))
        sub = resolve_model(f"openai:{sub_name}", ModelOptions(base_url=srv.url, api_key="k", vision=vision))
        rlm = RLM(root, sub_model=sub, trace=False, sandbox=sandbox())
        result = rlm.run("q", Context.from_paths([tmp_path / "pics"]))
        requests = list(srv.requests)
    assert result.answer == "done"
    assert not [r for r in requests if r.headers.get("x-rlmx-purpose") == "llm_query"]
    second_root = [r for r in requests if r.headers.get("x-rlmx-purpose") == "root"][1]
    assert said in str(second_root.body) and "images cannot be sent to openai:" in str(second_root.body)


def test_a_path_outside_the_context_s_image_files_is_refused(tmp_path: Path) -> None:
    picture_folder(tmp_path / "pics")
    secret = tmp_path / "secret.png"
    secret.write_bytes(picture("PNG", (5, 5)))
    cell = f'```repl\nprint(llm_query("x", images=[{str(secret)!r}]))\n```'
    with ScriptedServer(ScriptedModel(root=[cell, "FINAL(done)"])) as srv:
        lm = resolve_model("openai:scripted", ModelOptions(base_url=srv.url, api_key="k", vision=True))
        RLM(lm, trace=False, sandbox=sandbox()).run("q", Context.from_paths([tmp_path / "pics"]))
        requests = list(srv.requests)
    assert not [r for r in requests if r.headers.get("x-rlmx-purpose") == "llm_query"]
    assert "is not an image file of this run's context" in str(requests[-1].body)


def test_a_child_rlm_takes_image_documents_as_its_context(tmp_path: Path) -> None:
    files = picture_folder(tmp_path / "pics")
    root_cell = (
        '```repl\nprint(rlm_query("look", context=[d for d in context if d["path"].endswith(".png")]))\n```'
    )
    child_cell = '```repl\nprint(len(context), llm_query("what is it?", images=context))\n```'
    script = ScriptedModel(
        root=[root_cell, "FINAL(done)"], child=[child_cell, "FINAL(child saw it)"], sub="a receipt"
    )
    with ScriptedServer(script) as srv:
        lm = resolve_model("openai:scripted", ModelOptions(base_url=srv.url, api_key="k", vision=True))
        rlm = RLM(lm, trace=False, sandbox=sandbox(), limits=Limits(max_depth=2))
        result = rlm.run("q", Context.from_paths([tmp_path / "pics"]))
        requests = list(srv.requests)
    assert result.answer == "done", result.error
    (call,) = vision_calls_of(requests)
    assert call.headers["x-rlmx-depth"] == "2"
    (part,) = [p for p in call.body["messages"][0]["content"] if p["type"] == "image_url"]
    assert base64.b64decode(part["image_url"]["url"].partition(",")[2]) == files["scans/receipt.png"]


def vision_calls_of(requests: list[Any]) -> list[Any]:
    return [r for r in requests if r.headers.get("x-rlmx-purpose") == "llm_query"]


def test_the_cost_limit_holds_with_images(tmp_path: Path) -> None:
    """The worst-case estimate counts an image's tokens (here the upper-bound fallback: 4000 x 3000 / 750
    = 16,000 tokens, $1.60 at $100 a million), so a $1 budget refuses the call before it is made, while
    the same prompt without the image ($0.0002) goes through."""
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "big.png").write_bytes(picture("PNG", (4000, 3000)))
    cell = (
        "```repl\nprint(llm_query('plain'))\ntry:\n    llm_query('plain', images=[context[0]])\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n```"
    )
    with ScriptedServer(
        ScriptedModel(root=[cell, "FINAL(done)"], sub="ok"), models=("scripted", "sub")
    ) as srv:
        root = resolve_model("openai:scripted", ModelOptions(base_url=srv.url, api_key="k"))
        sub = resolve_model("openai:sub", ModelOptions(base_url=srv.url, api_key="k", vision=True))
        pricer = Pricing({"openai:scripted": Price(0.0, 0.0), "openai:sub": Price(100.0, 0.0)})
        rlm = RLM(
            root,
            sub_model=sub,
            trace=False,
            sandbox=sandbox(),
            limits=Limits(max_cost_usd=1.0),
            pricer=pricer,
        )
        result = rlm.run("q", Context.from_paths([tmp_path / "pics"]))
        requests = list(srv.requests)
    calls = vision_calls_of(requests)
    assert len(calls) == 1 and isinstance(calls[0].body["messages"][0]["content"], str)
    assert result.answer == "done" and result.usage["by_model"]["openai:sub"]["calls"] == 1
    assert result.usage["cost_usd"] < 1.0
    roots = [r for r in requests if r.headers.get("x-rlmx-purpose") == "root"]
    assert "BudgetExhaustedError budget exhausted: max_cost_usd=1.0 reached" in str(roots[-1].body)


def test_the_viewer_shows_each_vision_call_with_its_images_names_and_sizes(tmp_path: Path) -> None:
    from rlmx.trace import load as load_trace
    from rlmx.view import render_html
    from rlmx.view.model import report_data

    _, _, files, trace = run(tmp_path, "openai")
    data = report_data(load_trace(trace))
    subs = [n for n in data["nodes"] if n["k"] == "sub" and "image" in n["l"]]
    assert len(subs) == 4
    first = next(n for n in subs if n["l"].startswith("llm_query [3 images]: read the receipt"))
    shown = dict(first["x"])["images"].splitlines()
    size = len(files["scans/receipt.png"])
    assert shown[0] == f"scans/receipt.png (png, 640x480, {size:,} bytes)" and shown[2].startswith(
        "<bytes 2> (png, 10x12"
    )
    html = render_html(load_trace(trace))
    assert base64.b64encode(files["scans/receipt.png"]).decode()[:40] not in html
