"""The framing of the wire between the host and a REPL worker (and the run's zygote).

Every frame is a 12-byte header -- u32 length of a JSON object, u64 length of an optional binary blob --
then the JSON (UTF-8) and the blob. Large payloads (a 40 MB context) travel as the blob, so they are
never JSON-escaped. What the JSON objects may be -- typed frames, their fields, which side may send
which, the blob's named attachments -- is `rlmx.sandbox.frames`; this module only frames them.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any, cast

HEADER = struct.Struct(">IQ")
MAX_JSON_BYTES = 64 * 1024 * 1024  # a single frame's JSON part
MAX_BLOB_BYTES = 8 * 1024 * 1024 * 1024


def encode(message: dict[str, Any], blob: bytes = b"") -> bytes:
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=str).encode()
    return HEADER.pack(len(body), len(blob)) + body + blob


def encode_header(message: dict[str, Any], blob_len: int) -> bytes:
    """A frame without its blob, which the sender writes next (in pieces, without copying it)."""
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=str).encode()
    return HEADER.pack(len(body), blob_len) + body


def decode_header(header: bytes) -> tuple[int, int]:
    json_len, blob_len = HEADER.unpack(header)
    if json_len > MAX_JSON_BYTES or blob_len > MAX_BLOB_BYTES:
        raise ValueError(f"frame too large ({json_len} + {blob_len} bytes)")
    return json_len, blob_len


def decode_body(body: bytes) -> dict[str, Any]:
    message = json.loads(body)
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ValueError("frame is not a typed message")
    return message


# --- blocking helpers, used by the worker side -------------------------------------------------


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("pipe closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> tuple[dict[str, Any], bytes]:
    json_len, blob_len = decode_header(_read_exact(fd, HEADER.size))
    message = decode_body(_read_exact(fd, json_len))
    blob = _read_blob(fd, blob_len) if blob_len else b""
    return message, blob


def _read_blob(fd: int, n: int) -> bytes:
    """`n` bytes read straight into one buffer: a 40 MB context is never held twice (pieces + joined)."""
    buffer = bytearray(n)
    view = memoryview(buffer)
    got = 0
    while got < n:
        count = os.readv(fd, [view[got : got + (1 << 20)]])
        if not count:
            raise EOFError("pipe closed")
        got += count
    view.release()
    # a bytearray, returned as bytes without a copy: its receivers only decode or json-parse it
    return cast(bytes, buffer)


def write_frame(fd: int, message: dict[str, Any], blob: bytes = b"") -> None:
    data = memoryview(encode(message, blob))
    while data:
        written = os.write(fd, data)
        data = data[written:]
