"""The server log of `rlmx serve`: one line per request on stderr, and where failures are explained.

Every request gets an id when it arrives; for a chat completion it is also the run id (the trace id the
client sees). When the request is over, one line is logged on the `rlmx.serve` logger:

    2026-12-01 10:15:00 INFO rlmx serve: 3f2a9c1d4e5b POST /v1/chat/completions 200 41.20 s stopped_by=final

at INFO, or at WARNING for a run that failed or a 5xx answer, with the error's first line. An unexpected
exception is logged at ERROR with its traceback; the client only gets a generic 500 naming the id.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rlmx.serve import openai_shapes as shapes

LOGGER_NAME = "rlmx.serve"
SCOPE_KEY = "rlmx.request"
ERROR_CHARS = 300

JSON_HEADERS = [(b"content-type", b"application/json")]

log = logging.getLogger(LOGGER_NAME)


def internal_error_json(request_id: str) -> bytes:
    return json.dumps(shapes.internal_error_body(request_id)).encode()


def new_id() -> str:
    return uuid.uuid4().hex[:12]


def one_line(text: Any, limit: int = ERROR_CHARS) -> str:
    """The first non-empty line of an error text, cut to `limit` characters."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    first = lines[0] if lines else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"


@dataclass
class RequestRecord:
    """What the request log line says about one request; the endpoints fill in the run's part."""

    id: str
    method: str
    path: str
    status: int | None = None
    stopped_by: str | None = None
    error: str | None = None  # a failed run's (or a 5xx answer's) error, one line
    started: float = 0.0

    def failed(self, stopped_by: str | None, error: Any) -> None:
        self.stopped_by = stopped_by or self.stopped_by
        self.error = one_line(error) or "failed"

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        took = f"{elapsed * 1000:.0f} ms" if elapsed < 1 else f"{elapsed:.2f} s"
        text = f"{self.id} {self.method} {self.path} {self.status or '-'} {took}"
        if self.stopped_by:
            text += f" stopped_by={self.stopped_by}"
        if self.error:
            text += f" error={self.error!r}"
        return text


def record_of(scope: Scope) -> RequestRecord:
    """The request's record (made by RequestLog); a bare one when the app runs without it (tests)."""
    record = scope.get(SCOPE_KEY)
    if not isinstance(record, RequestRecord):
        record = RequestRecord(new_id(), scope.get("method", "-"), scope.get("path", "-"))
        record.started = time.monotonic()
        scope[SCOPE_KEY] = record
    return record


class RequestLog:
    """ASGI middleware: gives each request its id and logs its line when the response is over.

    It sits outside Starlette's error handling, which sends the generic 500 and then re-raises: the
    exception is logged here with its traceback and goes no further (the response is already sent)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        record = RequestRecord(new_id(), scope.get("method", "-"), scope.get("path", "-"))
        record.started = time.monotonic()
        scope[SCOPE_KEY] = record
        started = False

        async def send_logged(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                record.status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_logged)
        except Exception as exc:
            record.error = record.error or one_line(f"{type(exc).__name__}: {exc}")
            log.error("request %s failed with an unexpected error", record.id, exc_info=exc)
            if not started:  # nothing was sent yet: the generic 500 goes from here
                await send_logged({"type": "http.response.start", "status": 500, "headers": JSON_HEADERS})
                await send({"type": "http.response.body", "body": internal_error_json(record.id)})
            record.status = record.status or 500
        finally:
            level = logging.WARNING if record.error or (record.status or 0) >= 500 else logging.INFO
            log.log(level, "%s", record.line())


def configure_logging(level: str) -> None:
    """Send rlmx's log lines (the request log among them) to stderr at `level` and above. Other libraries'
    loggers (httpx logs every model request at INFO) are left as they are."""
    logger = logging.getLogger("rlmx")
    logger.setLevel(level.upper())
    for other in [h for h in logger.handlers if getattr(h, "rlmx_stderr", False)]:
        logger.removeHandler(other)  # -v's plain handler (rlmx.commands.options): this one replaces it
    if not any(getattr(h, "rlmx_serve", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s rlmx serve: %(message)s", "%Y-%m-%d %H:%M:%S")
        )
        handler.rlmx_serve = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.propagate = False
