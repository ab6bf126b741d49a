"""The one wire protocol between the host and a REPL worker.

Framing: every frame is a 12-byte header -- u32 length of a JSON object, u64 length of an optional binary
blob -- then the JSON (UTF-8) and the blob. Large payloads (a 40 MB context) travel as the blob, so they
are never JSON-escaped.

Messages are JSON objects with a `type` and (for requests) an integer `id`. Direction is part of the
protocol: a worker may send only WORKER_TO_HOST types, and every response id must match a request that
is actually pending. Anything else is a protocol violation.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any, cast

HEADER = struct.Struct(">IQ")
MAX_JSON_BYTES = 64 * 1024 * 1024  # a single frame's JSON part
MAX_BLOB_BYTES = 8 * 1024 * 1024 * 1024

# host -> worker
# INIT: {context_kind: "inline-text"|"inline-json"|"none"|..., context_options: {..., profile?: "rlmx"|
# "official"}, history?: [...], output_chars?, cell_cpu_s?}, blob = payload
INIT = "init"
EXEC = "exec"  # {id, code, history_append: [...]}
GET_VAR = "get_var"  # {id, name}
# RPC_RESULT: {id, ok, result | error, kind?}; `result` is the call's value, or {value, notes: [line, ...]}
# (the worker prints each note in the cell's output as "[rlmx] <note>" and returns `value`)
RPC_RESULT = "rpc_result"
SHUTDOWN = "shutdown"
# PUT: {id, name, context_kind: "inline-text"|"inline-json"|"none"}, blob = the value: a session's value
# put into a live REPL under a reserved name (`context_N`, `history_N`, or `history`: the list the
# current question's messages are mirrored into). Files are read by the host first: never "files".
PUT = "put"
HOST_TO_WORKER = frozenset({INIT, EXEC, GET_VAR, RPC_RESULT, SHUTDOWN, PUT})

# worker -> host
READY = "ready"  # {pid}
# EXEC_RESULT: {id, output, error, final, restart?: why the worker wants a restart}; `final` is None or
# {kind: "final"|"final_var"|"answer_dict", text | json}
EXEC_RESULT = "exec_result"
VAR_RESULT = "var_result"  # {id, ok, value_json | text | error}
PUT_RESULT = "put_result"  # {id, ok, error?}
# RPC: {id, method, params}; params: llm_query {prompt, model}, llm_query_batched {prompts, model},
# rlm_query {prompt, model, context}, rlm_query_batched {prompts, model, contexts}, tool {name, args:
# [...], kwargs: {...}} (one of the user's tools, run on the host; see rlmx.engine.tools)
RPC = "rpc"
WORKER_TO_HOST = frozenset({READY, EXEC_RESULT, VAR_RESULT, RPC, PUT_RESULT})

# the operations a worker may ask of the host, and nothing else
RPC_METHODS = frozenset({"llm_query", "llm_query_batched", "rlm_query", "rlm_query_batched", "tool"})

# INIT's context_kind when the worker was forked from a zygote that already holds the context
INHERITED = "inherited"

# host <-> zygote, on the zygote's control socket (see zygote.py)
SETUP = "setup"  # host: {isolated, limits, scratch_mb, tmp_base, context_kind, context_options}, blob
ZYGOTE_READY = "zygote_ready"  # zygote: {isolation}
ZYGOTE_FAILED = "zygote_failed"  # zygote: {error}: it could not load the context or isolate itself
SPAWN = "spawn"  # host: {id, inherit}
SPAWNED = "spawned"  # zygote: {id, pid, workdir}, with fds [to-worker write end, from-worker read end, pidfd]


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
