"""Image parts of a chat request (`image_url`) as image documents of the run's context.

A data URL (base64 PNG, JPEG, WebP or GIF) is decoded; its size is already bounded by the request's.
A remote URL is fetched only when the server was given an allow-list of hosts (`image_url_hosts`):
its host must be on the list, every address it resolves to must be a public one (no loopback, private,
link-local or reserved address: the server's own network stays out of reach), a redirect is followed
only to a host on the list (at most 3), the body is capped (`MAX_IMAGE_BYTES`) and the fetch is timed
out; each hop's host is resolved once and the connection goes to the address that was checked (no
second lookup, so no DNS-rebinding window). Either way the bytes are written to a folder of the
request's own, removed with its context, and become files of the context: the REPL sees their figures,
never their bytes.
"""

from __future__ import annotations

import ipaddress
import shutil
import socket
import tempfile
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from rlmx.context import Context
from rlmx.context.sources import FileEntry, Manifest
from rlmx.errors import RLMError
from rlmx.images.parts import decoded
from rlmx.images.probe import HEAD_BYTES, probe

MAX_IMAGE_BYTES = 20 * 1024 * 1024
FETCH_TIMEOUT_S = 10.0
MAX_REDIRECTS = 3
Resolver = Callable[[str], list[str]]  # host -> its addresses


class ImageRejected(RLMError):
    """An image part the server will not take (one line, naming the part)."""


def image_url_of(part: dict[str, Any], where: str) -> str:
    image_url = part.get("image_url")
    url = image_url.get("url") if isinstance(image_url, dict) else image_url
    if not isinstance(url, str) or not url:
        raise ImageRejected(f"{where}: an image_url part needs image_url.url (a data URL or an https URL)")
    return url


def resolve_host(host: str) -> list[str]:
    return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None)})


Allowed = Callable[[Any], bool]  # an address (ipaddress object) -> whether it may be fetched from


def check_remote(
    url: str, hosts: Sequence[str], resolver: Resolver, where: str, allowed: Allowed | None = None
) -> str:
    """Refuse a URL whose host is not on the allow-list or resolves to any non-public address; return
    the checked address the fetch connects to (so no second resolution can move it)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("https", "http") or not host:
        raise ImageRejected(f"{where}: {url[:80]!r} is not an http(s) URL or a data URL")
    if host not in {h.lower() for h in hosts}:
        raise ImageRejected(
            f"{where}: images from {host} are not allowed on this server (its image_url_hosts list: "
            f"{', '.join(hosts) or 'empty, so only data URLs'}); send the image as a data URL"
        )
    try:
        addresses = resolver(host)
    except OSError as exc:
        raise ImageRejected(f"{where}: {host} cannot be resolved ({exc})") from None
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%")[0])
        if not (allowed(ip) if allowed is not None else ip.is_global):
            raise ImageRejected(f"{where}: {host} resolves to {address}, which is not a public address")
    if not addresses:
        raise ImageRejected(f"{where}: {host} resolves to no address")
    return addresses[0]


def pinned_backend(host: str, address: str) -> Any:
    """An httpcore network backend that connects `host` to the checked `address` only (TLS still names
    and verifies `host`: httpcore takes SNI and the certificate's name from the URL)."""
    import httpcore

    pinned = host

    class Pinned(httpcore.SyncBackend):
        def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            if host.lower() != pinned:
                raise httpcore.ConnectError(f"connection to {host} refused: only {pinned} is pinned")
            return super().connect_tcp(address, port, *args, **kwargs)

    return Pinned()


def fetch(
    url: str,
    hosts: Sequence[str],
    where: str,
    *,
    resolver: Resolver = resolve_host,
    allowed: Allowed | None = None,
) -> bytes:
    """A remote image's bytes, under the allow-list's rules (see the module's docstring). Each hop is
    resolved once, checked, and connected to the address checked (no DNS-rebinding window)."""
    import ssl

    import httpcore

    for _ in range(MAX_REDIRECTS + 1):
        address = check_remote(url, hosts, resolver, where, allowed)
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")[2]
        backend = pinned_backend((parts.hostname or "").lower(), address)
        timeout = {"connect": FETCH_TIMEOUT_S, "read": FETCH_TIMEOUT_S, "write": FETCH_TIMEOUT_S}
        try:
            with (
                httpcore.ConnectionPool(
                    ssl_context=ssl.create_default_context(), network_backend=backend
                ) as pool,
                pool.stream(
                    "GET",
                    url,
                    headers=[(b"Host", netloc.encode()), (b"Accept", b"image/*")],
                    extensions={"timeout": {**timeout, "pool": FETCH_TIMEOUT_S}},
                ) as reply,
            ):
                headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in reply.headers}
                if reply.status in (301, 302, 303, 307, 308) and "location" in headers:
                    url = urljoin(url, headers["location"])
                    continue
                if reply.status != 200:
                    raise ImageRejected(f"{where}: fetching the image gave HTTP {reply.status}")
                data = bytearray()
                for piece in reply.iter_stream():
                    data += piece
                    if len(data) > MAX_IMAGE_BYTES:
                        raise ImageRejected(f"{where}: the image is larger than {MAX_IMAGE_BYTES:,} bytes")
                return bytes(data)
        except (httpcore.NetworkError, httpcore.TimeoutException, httpcore.ProtocolError, OSError) as exc:
            raise ImageRejected(f"{where}: fetching the image failed ({type(exc).__name__})") from None
        except httpcore.UnsupportedProtocol:
            raise ImageRejected(f"{where}: {url[:80]!r} is not an http(s) URL") from None
    raise ImageRejected(f"{where}: more than {MAX_REDIRECTS} redirects")


def image_bytes(
    part: dict[str, Any], where: str, hosts: Sequence[str], resolver: Resolver = resolve_host
) -> bytes:
    url = image_url_of(part, where)
    if url.startswith("data:"):
        found = decoded(url)
        if found is None:
            raise ImageRejected(f"{where}: the data URL is not base64 (data:image/png;base64,...)")
        data = found[1]
    else:
        data = fetch(url, hosts, where, resolver=resolver)
    if probe(data[:HEAD_BYTES]) is None:
        raise ImageRejected(f"{where}: the image is not a PNG, JPEG, WebP or GIF whose size can be read")
    return data


def context_with_images(
    docs: list[dict[str, Any]], images: list[tuple[str, bytes]], files: Sequence[tuple[str, Path]] = ()
) -> Any:
    """The text documents, image `files` already on disk, and the images' bytes as files of a folder of
    the request's own (removed when the context is)."""
    folder = Path(tempfile.mkdtemp(prefix="rlmx-serve-images-"))
    files = list(files)
    for index, (name, data) in enumerate(images):
        info = probe(data[:HEAD_BYTES])
        suffix = {"jpeg": ".jpg"}.get(info.format, f".{info.format}") if info else ".img"
        path = folder / f"image{index}{suffix}"
        path.write_bytes(data)
        files.append((f"{name}{suffix}", path))
    context = context_with_files(docs, files)
    weakref.finalize(context, shutil.rmtree, str(folder), True)
    return context


def context_with_files(docs: list[dict[str, Any]], files: list[tuple[str, Path]]) -> Context:
    """A context of text documents (read already) and image files (read on demand, by the host)."""
    manifest = Manifest(inline=[{"path": d["path"], "text": d["text"]} for d in docs])
    for name, path in files:
        manifest.files.append(FileEntry(str(path), name, path.stat().st_size, "image"))
    return Context(manifest=manifest, given=[name for name, _ in files])
