"""A minimal OTLP/HTTP trace receiver for the quick command-line tests (the protobuf messages of
opentelemetry-proto, POST /v1/traces); the real receiver is in test_otlp_phoenix.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from span_tree import Span


def value_of(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value_of(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def attrs_of(items: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in items}


class Received:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.resources: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # of each export request
        self.lock = threading.Lock()

    def add(self, body: bytes) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.lock:
            for rs in request.resource_spans:
                self.resources.append(attrs_of(rs.resource.attributes))
                for scope in rs.scope_spans:
                    for s in scope.spans:
                        self.spans.append(
                            Span(
                                name=s.name,
                                span_id=s.span_id.hex(),
                                parent_id=s.parent_span_id.hex() or None,
                                trace_id=s.trace_id.hex(),
                                attributes=attrs_of(s.attributes),
                                events=[
                                    {"name": e.name, "attributes": attrs_of(e.attributes)} for e in s.events
                                ],
                            )
                        )


@contextmanager
def otlp_http_receiver() -> Iterator[tuple[str, Received]]:
    """(the endpoint for OTEL_EXPORTER_OTLP_ENDPOINT, what it received)."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            if self.path == "/v1/traces":
                received.headers.append({k.lower(): v for k, v in self.headers.items()})
                received.add(body)
                self.send_response(200)
            else:
                self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
