"""The image layer's rules: reading formats and sizes, capability, caps, token estimates, wire refs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from images.support import picture, picture_folder
from rlmx.context import Context
from rlmx.context.payload import load_payload
from rlmx.images import tokens
from rlmx.images.parts import Picture, content_text, message_image_tokens, prepare, resolve, user_content
from rlmx.images.probe import probe
from rlmx.images.vision import ANTHROPIC, OPENAI, ImageRefused, caps_for, check_caps, check_sees, family_sees
from rlmx.lm.base import estimate_message_tokens
from rlmx.repl import image_refs
from rlmx.testing import FunctionLM


@pytest.mark.parametrize(
    ("fmt", "size", "name"),
    [
        ("PNG", (640, 480), "png"),
        ("JPEG", (300, 200), "jpeg"),
        ("WEBP", (120, 90), "webp"),
        ("GIF", (33, 44), "gif"),
    ],
)
def test_probe_reads_format_and_pixel_size_from_the_first_bytes(
    fmt: str, size: tuple[int, int], name: str
) -> None:
    info = probe(picture(fmt, size))
    assert info is not None and (info.format, info.width, info.height) == (name, *size)


def test_probe_reads_lossless_webp_and_refuses_junk() -> None:
    from io import BytesIO

    from PIL import Image

    out = BytesIO()
    Image.new("RGB", (50, 60)).save(out, format="WEBP", lossless=True)
    info = probe(out.getvalue())
    assert info is not None and (info.width, info.height) == (50, 60)
    assert probe(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))) is None
    assert probe(b"plain text") is None


def test_a_folder_of_only_images_is_a_usable_context_of_image_documents(tmp_path: Path) -> None:
    files = picture_folder(tmp_path)
    context = Context.from_paths(tmp_path)
    context.check_usable()
    loaded = load_payload(context.payload())
    docs = {d["path"]: d for d in loaded.value}
    assert docs["scans/receipt.png"] == {
        "path": "scans/receipt.png",
        "text": "",
        "image": {"format": "png", "width": 640, "height": 480, "bytes": len(files["scans/receipt.png"])},
    }
    assert loaded.stats["images"] == {"gif": 1, "webp": 1, "jpeg": 1, "png": 1}
    assert "Images among them: 4" in context.describe() and "images=[doc, ...]" in context.describe()
    assert not any("base64" in str(d) for d in loaded.value)


def test_capability_declared_then_known_families() -> None:
    assert family_sees("openai:gpt-4o-mini") is True and family_sees("openai:o3") is True
    assert family_sees("openai:o3-mini") is False and family_sees("openai:gpt-3.5-turbo") is False
    assert family_sees("openrouter:anthropic/claude-sonnet-4.5") is True
    assert family_sees("ollama:qwen2.5-vl:7b") is True  # the tag after the model name does not matter
    assert family_sees("ollama:llama3.2-vision") is True and family_sees("ollama:llama3.1") is False
    assert family_sees("vllm:my-finetune") is None
    lm = FunctionLM(lambda messages, settings: "x", name="vllm:my-finetune")
    with pytest.raises(ImageRefused, match="declare it with vision=True"):
        check_sees(lm)
    lm.vision = True  # type: ignore[attr-defined]
    check_sees(lm)
    text_only = FunctionLM(lambda messages, settings: "x", name="openai:gpt-3.5-turbo")
    with pytest.raises(ImageRefused, match="text-only model"):
        check_sees(text_only)


def test_caps_per_provider_with_a_clear_error() -> None:
    check_caps(ANTHROPIC, [("a.png", 5 * 1024 * 1024, 8000, 10)])
    with pytest.raises(
        ImageRefused, match=r"image a.png is 5,242,881 bytes; Anthropic takes at most 5,242,880"
    ):
        check_caps(ANTHROPIC, [("a.png", 5 * 1024 * 1024 + 1, 10, 10)])
    with pytest.raises(ImageRefused, match=r"8001x10 px; Anthropic takes at most 8,000 px a side"):
        check_caps(ANTHROPIC, [("a.png", 10, 8001, 10)])
    many = [(f"{i}.png", 10, 2001, 10) for i in range(21)]  # more than 20: 2,000 px a side
    with pytest.raises(ImageRefused, match="at most 2,000 px"):
        check_caps(ANTHROPIC, many)
    with pytest.raises(ImageRefused, match="101 images in one call; Anthropic takes at most 100"):
        check_caps(ANTHROPIC, [("a", 1, 1, 1)] * 101)
    with pytest.raises(ImageRefused, match="OpenAI takes at most 52,428,800 a request"):
        check_caps(OPENAI, [("a", 30 * 1024 * 1024, 1, 1)] * 2)
    claude = FunctionLM(lambda m, s: "x", name="anthropic:claude-sonnet-4-5")
    gemini = FunctionLM(lambda m, s: "x", name="gemini:gemini-2.5-flash")
    assert caps_for(claude).provider == "Anthropic" and caps_for(gemini).provider == "Gemini"


def test_token_rules_follow_each_provider_s_documented_examples() -> None:
    assert tokens.image_tokens("openai:gpt-4o", 1024, 1024) == 765  # 4 tiles: 85 + 4 x 170
    assert tokens.image_tokens("openai:gpt-4o", 2048, 4096) == 1105  # 768x1536: 6 tiles
    assert tokens.image_tokens("openai:gpt-4o", 4096, 4096, "low") == 85
    mini = tokens.image_tokens("openai:gpt-4o-mini", 1024, 1024)
    assert mini == 2833 + 4 * 5667 and round((mini - 2833) / (765 - 85)) == 33  # about 33x a tile
    assert tokens.image_tokens("openai:gpt-4.1-mini", 1024, 1024) == 1659  # 1,024 patches x 1.62
    assert tokens.image_tokens("openai:gpt-4.1-mini", 1800, 2400) == 2353  # 1,452 patches x 1.62
    assert tokens.image_tokens("anthropic:claude-sonnet-4-5", 1000, 1000) == 1334  # w x h / 750
    assert tokens.image_tokens("anthropic:claude-sonnet-4-5", 4000, 4000) <= 1534  # after its resize
    assert tokens.image_tokens("gemini:gemini-2.5-flash", 300, 300) == 258
    assert tokens.image_tokens("gemini:gemini-2.5-flash", 1536, 800) == 258 * 4
    fallback = tokens.image_tokens("vllm:my-model", 4000, 3000)
    assert fallback == 16_000 and fallback >= tokens.image_tokens("openai:gpt-4o", 4000, 3000)


def test_the_estimate_counts_image_tokens_and_never_base64_as_text() -> None:
    data = picture("PNG", (1024, 1024))
    content = user_content("hi", [Picture("a.png", data, probe(data))], "high")  # type: ignore[arg-type]
    messages = [{"role": "user", "content": content}]
    assert estimate_message_tokens(messages) == 1 + 4  # the text "hi" alone
    assert message_image_tokens(messages, "openai:gpt-4o") == 765
    assert "base64" not in content_text(
        content
    ) and f"[image: image/png, {len(data):,} bytes]" in content_text(content)


def test_resolve_reads_only_the_context_s_image_files(tmp_path: Path) -> None:
    files = picture_folder(tmp_path)
    table = {"icon.webp": str(tmp_path / "icon.webp")}
    (pic,) = resolve([{"path": "icon.webp"}], table)
    assert pic.data == files["icon.webp"] and pic.info.media_type == "image/webp"
    with pytest.raises(ImageRefused, match="not an image file of this run's context"):
        resolve([{"path": str(tmp_path / "anim.gif")}], table)
    with pytest.raises(ImageRefused, match="not a PNG, JPEG, WebP or GIF"):
        resolve([b"not an image"], table)
    lm = FunctionLM(lambda m, s: "x", name="openai:gpt-4o")
    with pytest.raises(ImageRefused, match="detail must be auto, low or high"):
        prepare(lm, "p", [{"path": "icon.webp"}], "ultra", table)
    content, shown = prepare(lm, "p", [{"path": "icon.webp"}], "low", table)
    assert shown == f"p\n[images: icon.webp (webp, 120x90, {len(files['icon.webp']):,} bytes)]"
    assert content[1]["image_url"]["detail"] == "low"


def test_wire_refs_detach_bytes_as_attachments_and_back() -> None:
    made = picture("PNG", (4, 4))
    wire: Any = image_refs.wire_images([{"path": "a.png", "text": "", "image": {}}, "b.png", bytearray(made)])
    params, attachments = image_refs.detach({"prompt": "p", "images": wire})
    assert params["images"] == [{"path": "a.png"}, {"path": "b.png"}, {"attachment": "image0"}]
    assert attachments == {"image0": made}
    assert image_refs.attach(params, attachments)["images"][2] == made
    with pytest.raises(ValueError, match="an attachment no image refers to"):
        image_refs.attach({"images": []}, attachments)
    with pytest.raises(TypeError, match="is not an image"):
        image_refs.wire_images([3])
    with pytest.raises(ValueError, match="detail must be one of"):
        image_refs.check_detail("ultra")


def test_the_price_catalog_is_a_source_where_it_prices_image_input() -> None:
    from rlmx.pricing import catalog_sees_images

    assert catalog_sees_images("openai:gpt-image-1") is True  # genai-prices lists input_image_mtok
    assert catalog_sees_images("openai:gpt-3.5-turbo") is None  # silence: no opinion
    lm = FunctionLM(lambda m, s: "x", name="openai:gpt-image-1")
    with pytest.raises(ImageRefused, match="does not know whether it sees images"):
        check_sees(lm)
    check_sees(lm, catalog=True)
    lm.vision = False  # type: ignore[attr-defined]  # a declaration wins over the catalog
    with pytest.raises(ImageRefused, match="declared text-only"):
        check_sees(lm, catalog=True)


def test_an_rpc_frame_carries_images_only_under_their_names() -> None:
    from rlmx.sandbox import frames, wire

    made = picture("PNG", (3, 3))
    params, attachments = image_refs.detach({"prompt": "p", "model": None, "images": [made]})
    data = frames.encode(frames.Rpc(1, "llm_query", params), attachments)
    message = wire.decode_body(
        data[wire.HEADER.size : wire.HEADER.size + wire.decode_header(data[: wire.HEADER.size])[0]]
    )
    frame, got = frames.decode(message, made, frames.WORKER_TO_HOST)
    assert isinstance(frame, frames.Rpc) and image_refs.attach(frame.params, got)["images"] == [made]
    forged = {**message, "attachments": [["context", len(made)]]}
    with pytest.raises(frames.ProtocolError, match="may not carry attachments"):
        frames.decode(forged, made, frames.WORKER_TO_HOST)
