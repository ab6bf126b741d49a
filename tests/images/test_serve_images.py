"""`rlmx serve`: a chat request's image_url parts become image documents of the run's context (data
URLs), and remote URLs are taken only from an allow-list of public hosts."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import httpx
import pytest

from images.support import picture
from rlmx.serve.images import ImageRejected, check_remote, image_bytes
from rlmx.testing import ScriptedModel, ScriptedServer

CELL = """```repl
pics = [d for d in context if d.get("image")]
print(sorted((d["path"], d["image"]["format"], d["image"]["width"]) for d in pics))
print(llm_query("what is it?", images=pics))
```"""


def data_url(data: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


def test_data_url_image_parts_become_image_documents_seen_by_the_sub_call(tmp_path: Path) -> None:
    from rlmx.serve.app import create_app
    from rlmx.serve.profiles import ServedProfile
    from rlmx.serve.settings import ServeSettings
    from rlmx.spec.options import RunOptions
    from serve_helpers import TOKEN, app_in_thread

    png, jpeg = picture("PNG", (64, 32)), picture("JPEG", (20, 10))
    with ScriptedServer(
        ScriptedModel(root=[CELL, "FINAL(served)"], sub="two pictures"), models=("scripted", "gpt-4o")
    ) as srv:
        options = RunOptions(model="openai:scripted", sub_model="openai:gpt-4o", base_url=srv.url)
        profile = ServedProfile("scripted", options)
        profile.prepare()
        settings = ServeSettings(profiles={"scripted": profile}, token=TOKEN, trace_dir=tmp_path)
        content = [
            {"type": "text", "text": "what are these?"},
            {"type": "image_url", "image_url": {"url": data_url(png)}},
            {"type": "image_url", "image_url": {"url": data_url(jpeg, "image/jpeg"), "detail": "low"}},
        ]
        body = {"model": "rlmx/scripted", "messages": [{"role": "user", "content": content}]}
        headers = {"authorization": f"Bearer {TOKEN}"}
        with app_in_thread(create_app(settings)) as url:
            reply = httpx.post(f"{url}/chat/completions", json=body, headers=headers, timeout=60)
            assert reply.status_code == 200, reply.text
            bad = {
                **body,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            content[0],
                            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                        ],
                    }
                ],
            }
            refused = httpx.post(f"{url}/chat/completions", json=bad, headers=headers, timeout=60)
        requests = list(srv.requests)
    assert reply.json()["choices"][0]["message"]["content"] == "served"
    roots = [r for r in requests if r.headers.get("x-rlmx-purpose") == "root"]
    listing = "[('messages[0].content[1].png', 'png', 64), ('messages[0].content[2].jpg', 'jpeg', 20)]"
    assert listing in str(roots[-1].body)
    assert base64.b64encode(png).decode()[:40] not in str([r.body for r in roots])
    (vision,) = [r for r in requests if r.headers.get("x-rlmx-purpose") == "llm_query"]
    urls = [p["image_url"]["url"] for p in vision.body["messages"][0]["content"] if p["type"] == "image_url"]
    assert urls == [data_url(png), data_url(jpeg, "image/jpeg")]
    assert (
        refused.status_code == 400
        and "images from example.com are not allowed on this server" in refused.text
    )


def test_the_url_allow_list_checks_host_and_resolved_addresses() -> None:
    hosts = ("images.example.com",)
    public = lambda host: ["93.184.216.34"]  # noqa: E731
    check_remote("https://images.example.com/a.png", hosts, public, "p")
    with pytest.raises(ImageRejected, match=r"images from evil\.example are not allowed"):
        check_remote("https://evil.example/a.png", hosts, public, "p")
    for address in ("127.0.0.1", "10.0.0.5", "169.254.169.254", "::1", "192.168.1.1"):
        with pytest.raises(
            ImageRejected, match=f"resolves to {re.escape(address)}, which is not a public address"
        ):
            check_remote(
                "https://images.example.com/a.png", hosts, lambda host, a=address: ["93.184.216.34", a], "p"
            )
    with pytest.raises(ImageRejected, match="not an http"):
        check_remote("file:///etc/passwd", hosts, public, "p")
    with pytest.raises(ImageRejected, match="only data URLs"):
        image_bytes({"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}, "p", ())
    with pytest.raises(ImageRejected, match="not a PNG, JPEG, WebP or GIF"):
        image_bytes({"type": "image_url", "image_url": {"url": data_url(b"hello")}}, "p", ())


def test_redirects_leave_the_allow_list_only_to_be_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fetch over a local transport: an allowed host redirecting to one off the list is refused, and
    a body past the cap is cut off."""
    from rlmx.serve import images

    png = picture("PNG", (8, 8))

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/jump":
            return httpx.Response(302, headers={"location": "https://internal.example/secret.png"})
        if request.url.path == "/big":
            return httpx.Response(200, content=b"\x89PNG" + bytes(images.MAX_IMAGE_BYTES))
        return httpx.Response(200, content=png)

    transport = httpx.MockTransport(handler)

    def stream(method: str, url: str, **options: object) -> object:
        assert options["follow_redirects"] is False  # redirects are rlmx's to judge, one by one
        return httpx.Client(transport=transport).stream(method, url)

    monkeypatch.setattr(httpx, "stream", stream)
    hosts = ("images.example.com",)
    public = lambda host: ["93.184.216.34"]  # noqa: E731
    assert images.fetch("https://images.example.com/ok.png", hosts, "p", resolver=public) == png
    with pytest.raises(ImageRejected, match=r"images from internal\.example are not allowed"):
        images.fetch("https://images.example.com/jump", hosts, "p", resolver=public)
    with pytest.raises(ImageRejected, match="larger than"):
        images.fetch("https://images.example.com/big", hosts, "p", resolver=public)
