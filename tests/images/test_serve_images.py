"""`rlmx serve`: a chat request's image_url parts become image documents of the run's context (data
URLs), and remote URLs are taken only from an allow-list of public hosts."""

from __future__ import annotations

import base64
import http.server
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from images.support import picture
from rlmx.serve.images import MAX_IMAGE_BYTES, ImageRejected, check_remote, image_bytes
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


class _Images(http.server.BaseHTTPRequestHandler):
    """A local image host: /ok.png, /jump (to another listed host), /out (to an unlisted one), /big."""

    png = b""
    seen: list[tuple[str, str]]

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("Host", "")))
        port = self.server.server_address[1]
        if self.path == "/jump":
            self._reply(302, b"", f"http://images.test:{port}/ok.png")
        elif self.path == "/out":
            self._reply(302, b"", f"http://internal.test:{port}/secret.png")
        elif self.path == "/big":
            self._reply(200, b"\x89PNG" + bytes(MAX_IMAGE_BYTES))
        else:
            self._reply(200, self.png)

    def _reply(self, status: int, body: bytes, location: str = "") -> None:
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:  # the client stopped reading at the cap
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def image_hosts() -> Iterator[tuple[int, list[tuple[str, str]], list[tuple[str, str]]]]:
    """The real image host on 127.0.0.1 and a rebinding target on 127.0.0.2, on the same port."""
    good_seen: list[tuple[str, str]] = []
    evil_seen: list[tuple[str, str]] = []
    good_handler = type("Good", (_Images,), {"png": picture("PNG", (8, 8)), "seen": good_seen})
    good = http.server.ThreadingHTTPServer(("127.0.0.1", 0), good_handler)
    port = good.server_address[1]
    evil_handler = type("Evil", (_Images,), {"png": b"evil", "seen": evil_seen})
    evil = http.server.ThreadingHTTPServer(("127.0.0.2", port), evil_handler)
    for server in (good, evil):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield port, good_seen, evil_seen
    finally:
        for server in (good, evil):
            server.shutdown()
            server.server_close()


def test_the_fetch_connects_to_the_address_that_was_checked(
    image_hosts: tuple[int, list[tuple[str, str]], list[tuple[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebinding DNS: the check's lookup of a host answers 127.0.0.1, every later one 127.0.0.2 (the
    system resolver too); the bytes still come from the checked address, with the URL's Host header;
    redirects are re-resolved, re-checked and pinned hop by hop."""
    from rlmx.serve import images

    port, good_seen, evil_seen = image_hosts
    lookups: list[str] = []

    def rebinding(host: str) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"] if lookups.count(host) == 1 else ["127.0.0.2"]

    real = socket.getaddrinfo

    def system(host: str, *args: object, **kwargs: object) -> object:
        return real("127.0.0.2" if str(host).endswith(".test") else host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", system)
    hosts = ("images.test", "second.test")
    loopback = lambda ip: ip.is_loopback  # noqa: E731  (this test's hosts are local)
    png = picture("PNG", (8, 8))
    url = f"http://images.test:{port}/ok.png"
    assert images.fetch(url, hosts, "p", resolver=rebinding, allowed=loopback) == png
    assert lookups == ["images.test"] and good_seen == [("/ok.png", f"images.test:{port}")]
    lookups.clear()
    good_seen.clear()
    got = images.fetch(f"http://second.test:{port}/jump", hosts, "p", resolver=rebinding, allowed=loopback)
    assert got == png and lookups == ["second.test", "images.test"]  # each hop resolved once and checked
    assert good_seen == [("/jump", f"second.test:{port}"), ("/ok.png", f"images.test:{port}")]
    assert evil_seen == []  # the later answers never reached a connection
    with pytest.raises(ImageRejected, match=r"second\.test resolves to 127\.0\.0\.2, which is not a public"):
        images.fetch(
            f"http://second.test:{port}/ok.png", hosts, "p", resolver=rebinding
        )  # default: is_global
    fixed = lambda host: ["127.0.0.1"]  # noqa: E731
    with pytest.raises(ImageRejected, match=r"images from internal\.test are not allowed"):
        images.fetch(f"http://images.test:{port}/out", hosts, "p", resolver=fixed, allowed=loopback)
    with pytest.raises(ImageRejected, match="larger than"):
        images.fetch(f"http://images.test:{port}/big", hosts, "p", resolver=fixed, allowed=loopback)
    assert evil_seen == []


def test_a_pinned_connection_goes_nowhere_but_its_host() -> None:
    import httpcore

    from rlmx.serve.images import pinned_backend

    with pytest.raises(httpcore.ConnectError, match=r"only images\.test is pinned"):
        pinned_backend("images.test", "127.0.0.1").connect_tcp("other.test", 80)
