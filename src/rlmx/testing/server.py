"""A scripted model server: a real HTTP server on 127.0.0.1 speaking the OpenAI chat API
(and the Anthropic Messages API), answered by a Python policy function.

It injects latency and faults per request and logs everything it receives, so a pipeline
can be tested end to end through its real HTTP client::

    def policy(messages, request):
        if request.purpose == "llm_query":  # rlmx says what each call is for (x-rlmx-* headers)
            return "a sub-model's reply"
        return "FINAL(42)" if request.iteration and request.iteration > 1 else "```repl\nprint(1)\n```"

    with ScriptedServer(policy, latency=0.05, faults=random_faults(0.1, seed=1)) as srv:
        run_my_pipeline(OpenAI(base_url=srv.url, api_key="x"))
        assert srv.served >= 1 and all(r.error is None for r in srv.requests)

`request.purpose`, `request.depth` and `request.iteration` come from the headers rlmx sends to
loopback endpoints only (see `rlmx.testing.replies`); they are None for requests from other clients.
A `ScriptedModel` is a ready-made policy that reads them.

Only the standard library is used. Each connection gets its own thread (keep-alive,
HTTP/1.1), so latency sleeps overlap and hundreds of concurrent requests are cheap.
"""

from __future__ import annotations

import contextlib
import copy
import json
import socket
import sys
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rlmx.testing.replies import (
    Fault,
    FaultFn,
    Latency,
    Policy,
    Reply,
    ScriptedRequest,
    call_fields,
    random_faults,
)

__all__ = ["Fault", "Reply", "ScriptedRequest", "ScriptedServer", "random_faults"]

_ROUTES = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}
_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error"}
_ERROR_TYPES |= {429: "rate_limit_error", 529: "overloaded_error"}


def _flatten(content: Any) -> str:
    """Message content as one string: text parts of a list joined, other parts dropped."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_flatten(part) for part in content)
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return content["text"]
        return _flatten(content.get("content"))  # e.g. Anthropic tool_result blocks
    return str(content)


def _extract_messages(body: dict[str, Any], api: str) -> list[dict[str, Any]]:
    msgs = [
        {"role": str(m.get("role", "user")), "content": _flatten(m.get("content"))}
        for m in body.get("messages") or []
        if isinstance(m, dict)
    ]
    system = _flatten(body.get("system")) if api == "anthropic" else ""
    return [{"role": "system", "content": system}, *msgs] if system else msgs


def _ceil4(n: int) -> int:
    return -(-n // 4)


class _HTTPServer(ThreadingHTTPServer):
    request_queue_size = 1024
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, owner: ScriptedServer, port: int) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # clients hanging up are normal here
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        self.server.owner._track(self.connection, add=False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- plumbing ---------------------------------------------------------------------
    def _read_body(self) -> bytes:
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        parts = []
        while (size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)) > 0:
            parts.append(self.rfile.read(size))
            self.rfile.readline()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass  # trailer fields
        return b"".join(parts)

    def _send(self, status: int, body: bytes | Any, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_sse(self, events: list[str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            data = event.encode()
            self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        self.wfile.write(b"0\r\n\r\n")

    def _error(self, req: ScriptedRequest | None, code: int, msg: str, fault: Fault | None = None) -> None:
        if req is not None and req.api == "anthropic":
            err = {"type": _ERROR_TYPES.get(code, "api_error"), "message": msg}
            payload: dict[str, Any] = {"type": "error", "error": err}
        else:
            payload = {
                "error": {"message": msg, "type": _ERROR_TYPES.get(code, "server_error"), "code": code}
            }
        if fault is not None and fault.body is not None:
            payload = fault.body  # a provider's own error shape, as recorded
        retry = fault.retry_after if fault else None
        if req is not None:
            req.error = None if fault else msg
            self.server.owner._done(req, code)
        self._send(code, payload, {"Retry-After": f"{retry:g}"} if retry is not None else None)

    def _authorized(self, api: str) -> bool:
        token = self.server.owner.auth_token
        if token is None:
            return True
        if self.headers.get("Authorization", "") == f"Bearer {token}":
            return True
        return api == "anthropic" and self.headers.get("x-api-key", "") == token

    # -- endpoints --------------------------------------------------------------------
    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path != "/v1/models":
            self._error(None, 404, f"no such endpoint: GET {path}")
        elif not self._authorized("openai"):
            self._error(None, 401, "missing or wrong API key")
        else:
            card = {"object": "model", "created": 0, "owned_by": "rlmx-scripted"}
            self._send(200, {"object": "list", "data": [{"id": m, **card} for m in self.server.owner.models]})

    def do_POST(self) -> None:
        owner = self.server.owner
        t0 = time.monotonic()
        raw = self._read_body()
        path = self.path.split("?", 1)[0].rstrip("/")
        api = _ROUTES.get(path, "openai")
        req = owner._log(path, api, {k.lower(): v for k, v in self.headers.items()}, t0)
        if path not in _ROUTES:
            return self._error(req, 404, f"no such endpoint: POST {path}")
        if not self._authorized(api):
            return self._error(req, 401, "missing or wrong API key")
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return self._error(req, 400, "request body is not a JSON object")
        req.body, req.messages = body, _extract_messages(body, api)
        req.model = str(body.get("model") or owner.models[0])
        try:
            fault = owner.faults(req) if owner.faults is not None else None
            delay = owner.latency(req) if callable(owner.latency) else owner.latency
        except Exception as exc:
            return self._error(req, 500, f"fault/latency function raised {type(exc).__name__}: {exc}")
        req.fault = fault.label if fault else None
        kind = fault.kind if fault else None
        if fault and kind == "trickle":
            return self._trickle(req, fault.seconds)
        delay += fault.seconds if fault else 0.0
        if delay > 0 and owner._stopping.wait(delay):
            kind = "disconnect"  # the server is stopping: drop the request
        if fault and kind == "status":
            return self._error(req, fault.code, fault.message, fault)
        if kind == "disconnect":
            owner._done(req, None)
            self.close_connection = True
            return None
        if kind == "invalid_json":
            owner._done(req, 200)
            return self._send(200, b'{"id": "scripted", "choices": [ this is not JSON')
        if kind in ("empty_choices", "empty_content"):
            reply = Reply("")
        else:
            try:
                result = owner.policy(req.messages, req)
                reply = Reply(result) if isinstance(result, str) else result
                if not isinstance(reply, Reply) or not isinstance(reply.text, str):
                    raise TypeError(f"policy returned {result!r:.80}, expected str or Reply(text: str)")
            except Exception as exc:
                return self._error(req, 500, f"policy raised {type(exc).__name__}: {exc}")
        self._reply(req, reply, empty_choices=kind == "empty_choices", count=kind in (None, "stall"))
        return None

    def _trickle(self, req: ScriptedRequest, interval_s: float) -> None:
        """Headers for a long body, then a byte per `interval_s` until the client goes or we stop."""
        owner = self.server.owner
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(1 << 30))
        self.end_headers()
        try:
            self.wfile.write(b"{")
            self.wfile.flush()
            while not owner._stopping.wait(max(interval_s, 0.001)):
                self.wfile.write(b" ")
                self.wfile.flush()
        except OSError:
            pass  # the client gave up: what this fault is for
        owner._done(req, None)
        self.close_connection = True

    def _reply(self, req: ScriptedRequest, reply: Reply, *, empty_choices: bool, count: bool) -> None:
        chars = sum(len(m["content"]) for m in req.messages)
        tin = reply.input_tokens if reply.input_tokens is not None else _ceil4(chars)
        tout = reply.output_tokens if reply.output_tokens is not None else _ceil4(len(reply.text))
        if reply.usage is not None:  # a provider's own usage shape: count what it says was served
            tin = int(reply.usage.get("prompt_tokens", tin))
            tout = int(reply.usage.get("completion_tokens", tout))
        req.reply_text = reply.text
        stream = bool(req.body.get("stream"))
        owner = self.server.owner
        owner._done(req, 200, (tin, tout) if count else None)  # book-keep before the client sees it
        rid = f"{'msg' if req.api == 'anthropic' else 'chatcmpl'}-scripted-{req.index}"
        if req.api == "anthropic":
            content = [] if empty_choices else [{"type": "text", "text": reply.text}]
            usage = {"input_tokens": max(0, tin - reply.cached_tokens), "output_tokens": tout}
            usage |= {"cache_creation_input_tokens": 0, "cache_read_input_tokens": reply.cached_tokens}
            stop = _ANTHROPIC_STOP.get(reply.finish_reason, reply.finish_reason)
            msg: dict[str, Any] = {
                "id": rid,
                "type": "message",
                "role": "assistant",
                "content": content,
                "model": req.model,
            }
            msg |= {"stop_reason": stop, "stop_sequence": None, "usage": usage}
            if not stream:
                return self._send(200, msg)
            return self._send_sse(_anthropic_events(msg, [] if empty_choices else _pieces(reply.text)))
        usage_obj: dict[str, Any] = {
            "prompt_tokens": tin,
            "completion_tokens": tout,
            "total_tokens": tin + tout,
        }
        usage_obj["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
        if reply.cost is not None:
            usage_obj["cost"] = reply.cost
        if reply.usage is not None:
            usage_obj = dict(reply.usage)
        base = {"id": rid, "created": int(time.time()), "model": req.model}
        if not stream:
            message = {"role": "assistant", "content": reply.text}
            choice = {"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}
            completion = {**base, "object": "chat.completion", "choices": [] if empty_choices else [choice]}
            return self._send(200, {**completion, "usage": usage_obj})
        include_usage = bool((req.body.get("stream_options") or {}).get("include_usage"))
        chunk = {**base, "object": "chat.completion.chunk"}
        extra = {"usage": None} if include_usage else {}

        def delta(d: dict[str, Any], finish: str | None = None) -> str:
            choices = [] if empty_choices else [{"index": 0, "delta": d, "finish_reason": finish}]
            return "data: " + json.dumps({**chunk, "choices": choices, **extra}) + "\n\n"

        events = [delta({"role": "assistant", "content": ""})]
        events += [delta({"content": p}) for p in _pieces(reply.text)]
        events.append(delta({}, reply.finish_reason))
        if include_usage:
            events.append("data: " + json.dumps({**chunk, "choices": [], "usage": usage_obj}) + "\n\n")
        events.append("data: [DONE]\n\n")
        return self._send_sse(events)


def _pieces(text: str, n: int = 4) -> list[str]:
    """The text cut into up to `n` stream deltas."""
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _anthropic_events(msg: dict[str, Any], pieces: list[str]) -> list[str]:
    def ev(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

    usage = msg["usage"]
    start = {**msg, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 0}}
    events = [ev("message_start", {"message": start})]
    if pieces or msg["content"]:
        events.append(ev("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}))
        deltas = [{"index": 0, "delta": {"type": "text_delta", "text": p}} for p in pieces]
        events += [ev("content_block_delta", d) for d in deltas]
        events.append(ev("content_block_stop", {"index": 0}))
    delta = {"stop_reason": msg["stop_reason"], "stop_sequence": None}
    events.append(ev("message_delta", {"delta": delta, "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append(ev("message_stop", {}))
    return events


class ScriptedServer:
    """A local OpenAI/Anthropic-compatible server answered by `policy(messages, request)`.

    Use as a context manager (or call start()/stop()). `url` is the OpenAI base URL
    (".../v1"); `base_url` is the bare origin for the Anthropic SDK.
    """

    def __init__(
        self,
        policy: Policy,
        latency: Latency = 0.0,
        faults: FaultFn | None = None,
        models: Iterable[str] = ("scripted",),
        *,
        auth_token: str | None = None,
        port: int = 0,
    ) -> None:
        self.policy = policy
        self.latency = latency
        self.faults = faults
        self.models = tuple(models) or ("scripted",)
        self.auth_token = auth_token
        self._port = port
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._requests: list[ScriptedRequest] = []
        self._served = 0
        self._usage = {"input_tokens": 0, "output_tokens": 0}
        self._conns: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> ScriptedServer:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = httpd = _HTTPServer(self, self._port)
        # poll_interval only bounds how long stop() waits; requests are accepted immediately
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(0.05,), name="rlmx-scripted", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()  # wakes handlers sleeping on latency/stall faults
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:  # wake handler threads blocked on idle keep-alive connections
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- observation ---------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("ScriptedServer is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def requests(self) -> list[ScriptedRequest]:
        """Copies of the logged POST requests, in arrival order."""
        with self._lock:
            return [copy.copy(r) for r in self._requests]

    @property
    def served(self) -> int:
        with self._lock:
            return self._served

    @property
    def usage_served(self) -> dict[str, int]:
        with self._lock:
            return dict(self._usage)

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()
            self._served = 0
            self._usage = {"input_tokens": 0, "output_tokens": 0}

    def __repr__(self) -> str:
        where = self.url if self._httpd is not None else "stopped"
        with self._lock:
            n, served = len(self._requests), self._served
        return f"ScriptedServer({where}, models={list(self.models)}, requests={n}, served={served})"

    # -- handler hooks -------------------------------------------------------------------
    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def _log(self, path: str, api: str, headers: dict[str, str], t0: float) -> ScriptedRequest:
        with self._lock:
            req = ScriptedRequest(
                len(self._requests), path, headers=headers, t_received=t0, api=api, **call_fields(headers)
            )
            self._requests.append(req)
            return req

    def _done(self, req: ScriptedRequest, status: int | None, usage: tuple[int, int] | None = None) -> None:
        with self._lock:
            req.status, req.t_replied = status, time.monotonic()
            if usage is not None:
                self._served += 1
                self._usage["input_tokens"] += usage[0]
                self._usage["output_tokens"] += usage[1]
