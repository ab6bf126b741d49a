"""The ASGI app of `rlmx serve` (Starlette): /v1/chat/completions, /v1/models, /health.

A request becomes one RLM run (see rlmx.serve.chat), or the next question of a session the caller
started (`"session"` in the body's `rlmx` object; rlmx.serve.sessions): its id comes back in the
`x-rlmx-session` header and in the response's `rlmx` object. Runs are bounded by a gate with a queue (429 when
full); a client that disconnects cancels its run, which kills the run's REPL workers. Every error has
OpenAI's shape: {"error": {"message", "type", "param", "code"}}; a 500 names only the trace id, and its
cause goes to the server log (rlmx.serve.logs), never to the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from rlmx import telemetry
from rlmx.errors import ConfigError, EmptyContext, RLMError
from rlmx.serve import openai_shapes as shapes
from rlmx.serve.chat import BadRequest, RunRequest, parse_chat_request
from rlmx.serve.images import ImageRejected, context_with_files, context_with_images, image_bytes
from rlmx.serve.jobs import Busy, RunGate, RunJob
from rlmx.serve.logs import RequestLog, RequestRecord, log, record_of
from rlmx.serve.roots import PathRefused, usable_context
from rlmx.serve.sessions import NEW, HeldSession, SessionRefused, SessionStore
from rlmx.serve.settings import ServeSettings, trace_file
from rlmx.session import SessionClosed
from rlmx.trace.writer import Sink

DRAIN_CAP = 64 * 2**20  # an oversized body is read (and dropped) up to this, so the client sees the 413
TRACE_HEADER = "x-rlmx-trace-id"
SESSION_HEADER = "x-rlmx-session"
PATH_CODES = {400: "bad_path", 403: "path_not_allowed", 404: "path_not_found", 413: "context_too_large"}


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        body = shapes.error_body(self.status, self.message, code=self.code, param=self.param)
        return JSONResponse(body, status_code=self.status, headers=self.headers)


async def wait_for_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


class RunStream(StreamingResponse):
    """Server-sent events for one run; the run is cancelled when the client goes away mid-stream."""

    def __init__(
        self, chunks: AsyncIterator[bytes], job: RunJob, headers: dict[str, str], record: RequestRecord
    ) -> None:
        super().__init__(chunks, media_type="text/event-stream", headers=headers)
        self.job = job
        self.record = record

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def stream() -> None:
                    await self.stream_response(send)
                    group.cancel_scope.cancel()

                async def listen() -> None:
                    await wait_for_disconnect(receive)
                    group.cancel_scope.cancel()

                group.start_soon(stream)
                group.start_soon(listen)
        finally:
            if not self.job.task.done():
                self.record.stopped_by = "cancelled"  # the client went away
            with anyio.CancelScope(shield=True):
                await self.job.cancel()


class ChatService:
    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self.gate = RunGate(settings.max_running, settings.max_queued)
        self.sessions = SessionStore(settings.max_sessions, settings.session_idle_s)
        self.started = int(time.time())

    # --- plumbing -------------------------------------------------------------------------------------
    def authorize(self, request: Request) -> None:
        if self.settings.token is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(), self.settings.token):
            raise ApiError(
                401,
                "missing or wrong bearer token: send 'Authorization: Bearer <token>' (the server's "
                "token: its RLMX_SERVE_TOKEN or `token` setting)",
                headers={"www-authenticate": "Bearer"},
            )

    async def read_json(self, request: Request) -> Any:
        limit = self.settings.max_request_bytes
        declared = request.headers.get("content-length", "")
        data = bytearray()
        received = 0
        too_big = declared.isdigit() and int(declared) > limit
        async for piece in request.stream():
            received += len(piece)
            too_big = too_big or received > limit
            if not too_big:
                data += piece
            elif received > DRAIN_CAP:
                break  # past the cap the connection is dropped rather than read on
        if too_big:
            raise ApiError(
                413,
                f"the request body is larger than this server's limit of {limit:,} bytes; pass large "
                "context as files under the server's roots (extra_body rlmx.paths) or raise its `max_request_bytes`",
            )
        try:
            return json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ApiError(400, f"the request body is not valid JSON: {exc}") from exc

    def load_context(self, run: RunRequest) -> Any:
        """Message and inline documents plus the confined server files (blocking: run in a thread)."""
        docs = list(run.documents)
        budget = self.settings.max_context_bytes - sum(len(d["text"]) for d in docs)
        if budget < 0:
            raise PathRefused(
                f"the context is larger than this server's limit of {self.settings.max_context_bytes:,} bytes",
                413,
            )
        files: list[tuple[str, Path]] = []  # image files under the roots
        if run.paths:
            docs.extend(self.settings.roots.load(run.paths, max_bytes=budget, images=files))
        if run.images:
            hosts = self.settings.image_url_hosts
            pictures = [(name, image_bytes(part, name, hosts)) for name, part in run.images]
            run.held = context_with_images(docs, pictures, files)
            return run.held
        if files:
            return context_with_files(docs, files)
        return usable_context(docs, given=[d["path"] for d in run.documents] + run.paths)

    # --- endpoints ------------------------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def models(self, request: Request) -> Response:
        self.authorize(request)
        return JSONResponse(
            {"object": "list", "data": [self.model_card(p) for p in self.settings.profiles.values()]}
        )

    async def model(self, request: Request) -> Response:
        self.authorize(request)
        wanted = request.path_params["model_id"]
        for profile in self.settings.profiles.values():
            if wanted in (profile.served_name, profile.name):
                return JSONResponse(self.model_card(profile))
        raise ApiError(404, f"the model {wanted!r} does not exist on this server", code="model_not_found")

    def model_card(self, profile: Any) -> dict[str, Any]:
        return {
            "id": profile.served_name,
            "object": "model",
            "created": self.started,
            "owned_by": "rlmx",
            "rlmx": {
                "model": profile.model,
                "sub_model": profile.sub_model or profile.model,
                "limits": vars(profile.limits),
                "prompt": profile.prompt_profile().name,
                "description": profile.description,
            },
        }

    async def chat(self, request: Request) -> Response:
        self.authorize(request)
        body = await self.read_json(request)
        try:
            run = parse_chat_request(body, self.settings.profiles, threshold=self.settings.context_threshold)
        except BadRequest as exc:
            raise ApiError(exc.status, str(exc), code=exc.code, param=exc.param) from exc
        if run.session is not None and run.session != NEW:
            self.session_of(run)  # an unknown or expired id is refused before any work
        try:
            ticket = self.gate.admit()
        except Busy as exc:
            raise ApiError(429, str(exc), headers={"retry-after": "5"}) from exc
        try:
            context = await asyncio.to_thread(self.load_context, run)
        except PathRefused as exc:
            ticket.close()
            raise ApiError(exc.status, str(exc), code=PATH_CODES.get(exc.status), param="rlmx.paths") from exc
        except EmptyContext as exc:
            ticket.close()
            raise ApiError(400, str(exc), code="empty_context") from exc
        except ImageRejected as exc:
            ticket.close()
            raise ApiError(400, str(exc), code="invalid_image", param="messages") from exc
        except BaseException:
            ticket.close()
            raise
        record = record_of(request.scope)
        run_id = record.id  # the request id is the run id, so the log line and the trace share it
        settings = self.settings
        trace = trace_file(settings.trace_dir, run_id) if settings.trace else False

        def make_rlm(sink: Sink) -> Any:
            return run.profile.rlm(limits=run.limits, on_event=sink, trace=trace, sandbox=settings.sandbox)

        held: HeldSession | None = None
        if run.session is not None:
            try:
                held = self.session_of(run)
            except ApiError:
                ticket.close()
                raise
        with telemetry.continued(request.headers):  # the run's task starts in the caller's trace
            job = RunJob(
                make_rlm,
                ticket,
                start=None if held is None else self.question_of(held, run, context, trace, run_id),
                question=run.question,
                context=context,
                context_note=run.context_note,
                output=run.output,
                run_id=run_id,
            )
        headers = {TRACE_HEADER: run_id}
        if held is not None:
            job.session_id = held.id
            headers[SESSION_HEADER] = held.id
        if run.stream:
            return RunStream(
                self.chunks(job, run, record), job, {**headers, "cache-control": "no-cache"}, record
            )
        return await self.complete(request, job, run, headers, record)

    def session_of(self, run: RunRequest) -> HeldSession:
        """The session a request names: a new one for "new", else the open one with that id."""
        assert run.session is not None
        settings = self.settings

        def make_rlm() -> Any:
            return run.profile.rlm(trace=False, sandbox=settings.sandbox)

        try:
            return self.sessions.get(run.session, run.profile, make_rlm)
        except SessionRefused as exc:
            headers = {"retry-after": "30"} if exc.status == 429 else None
            raise ApiError(
                exc.status, str(exc), code=exc.code, param="rlmx.session", headers=headers
            ) from exc

    def question_of(
        self, held: HeldSession, run: RunRequest, context: Any, trace: Any, run_id: str
    ) -> Callable[[Sink], Awaitable[Any]]:
        """The run of a request in a session: the session's next question, with the request's context
        (the next `context_N`), limits, progress sink and trace file. A new session whose first question
        could not even start is forgotten at once."""
        started_new = not held.session.results

        async def start(sink: Sink) -> Any:
            try:
                return await held.ask(
                    run.question,
                    context,
                    on_event=sink,
                    limits=run.limits,
                    trace=trace,
                    run_id=run_id,
                    output=run.output,
                    context_note=run.context_note,
                )
            except RLMError:
                if started_new and not held.session.results:
                    await self.sessions.drop(held)
                raise

        return start

    async def complete(
        self, request: Request, job: RunJob, run: RunRequest, headers: dict[str, str], record: RequestRecord
    ) -> Response:
        watcher = asyncio.create_task(wait_for_disconnect(request.receive))
        try:
            await asyncio.wait({job.task, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if not job.task.done():  # the client went away: stop the run, free its workers
                record.stopped_by = "cancelled"
                await job.cancel()
                return Response(status_code=499)
        finally:
            watcher.cancel()
            if not job.task.done():
                with anyio.CancelScope(shield=True):
                    await job.cancel()
        try:
            result = job.task.result()
        except RLMError as exc:
            raise self.start_error(exc, record, headers) from exc
        record.stopped_by = result.stopped_by
        problem = shapes.failure(result, run.output is not None)
        if problem is not None:
            record.failed(result.stopped_by, f"{problem.code}: {problem.detail}")
            return JSONResponse(
                shapes.failure_body(problem, result), status_code=problem.status, headers=headers
            )
        body = shapes.completion(result, run.profile.served_name, int(time.time()))
        if job.session_id is not None:
            body["rlmx"]["session"] = job.session_id
        return JSONResponse(body, headers=headers)

    @staticmethod
    def start_error(exc: RLMError, record: RequestRecord, headers: dict[str, str]) -> ApiError:
        """A run that raised instead of returning a result: a usage error (a ConfigError, e.g. a context
        with no usable text) is the client's 400; anything else is a generic 500, explained in the log."""
        if isinstance(exc, SessionClosed):  # it expired between the look-up and its question
            message = f'{exc}; start a new one with "session": "{NEW}"'
            return ApiError(404, message, code="session_not_found", headers=headers)
        if isinstance(exc, ConfigError):  # the caller's to fix: logged as any 400, at INFO
            code = "empty_context" if isinstance(exc, EmptyContext) else None
            return ApiError(400, str(exc), code=code, headers=headers)
        record.failed("error", f"{type(exc).__name__}: {exc}")
        return ApiError(500, f"internal error; trace id {record.id}", code="internal_error", headers=headers)

    async def chunks(self, job: RunJob, run: RunRequest, record: RequestRecord) -> AsyncIterator[bytes]:
        created, model, run_id = int(time.time()), run.profile.served_name, job.run_id
        accepted = {"event": "accepted", "trace_id": run_id}
        if job.session_id is not None:
            accepted["session"] = job.session_id
        yield shapes.sse(
            shapes.chunk(run_id, model, created, {"role": "assistant", "content": ""}, rlmx=accepted)
        )
        while (event := await job.events.get()) is not None:
            yield shapes.sse(shapes.chunk(run_id, model, created, {}, rlmx=event))
        try:
            result = await job.task
        except RLMError as exc:
            error = self.start_error(exc, record, {})
            yield shapes.sse(shapes.error_body(error.status, error.message, code=error.code))
            yield shapes.sse("[DONE]")
            return
        except Exception as exc:  # the stream has started: the client gets the generic error chunk
            record.failed("error", f"{type(exc).__name__}: {exc}")
            log.error("run %s failed with an unexpected error", run_id, exc_info=exc)
            yield shapes.sse(shapes.internal_error_body(run_id))
            yield shapes.sse("[DONE]")
            return
        record.stopped_by = result.stopped_by
        problem = shapes.failure(result, run.output is not None)
        if problem is not None:
            record.failed(result.stopped_by, f"{problem.code}: {problem.detail}")
            yield shapes.sse(shapes.failure_body(problem, result))
            yield shapes.sse("[DONE]")
            return
        yield shapes.sse(shapes.chunk(run_id, model, created, {"content": shapes.answer_content(result)}))
        info = shapes.run_info(result)
        if job.session_id is not None:
            info["session"] = job.session_id
        final = shapes.chunk(run_id, model, created, {}, finish=shapes.finish_reason(result), rlmx=info)
        yield shapes.sse(final)
        if run.include_usage:
            yield shapes.sse(shapes.usage_chunk(run_id, model, created, result))
        yield shapes.sse("[DONE]")


Endpoint = Callable[[Request], Awaitable[Response]]


def guarded(endpoint: Endpoint) -> Endpoint:
    async def handle(request: Request) -> Response:
        try:
            return await endpoint(request)
        except ApiError as exc:
            return exc.response()

    return handle


async def not_found(request: Request, exc: Exception) -> Response:
    status = int(getattr(exc, "status_code", 404))
    message = (
        f"{request.method} {request.url.path} is not an endpoint of rlmx serve" if status == 404 else str(exc)
    )
    return JSONResponse(shapes.error_body(status, message), status_code=status)


async def internal_error(request: Request, exc: Exception) -> Response:
    """An unexpected exception: the client gets the request id only; RequestLog logs the traceback."""
    record = record_of(request.scope)
    record.failed(None, f"{type(exc).__name__}: {exc}")
    return JSONResponse(shapes.internal_error_body(record.id), status_code=500)


def create_app(settings: ServeSettings) -> RequestLog:
    """The app, wrapped in the request log (which gives each request its id)."""
    return RequestLog(create_routes(settings))


def create_routes(settings: ServeSettings) -> Starlette:
    service = ChatService(settings)
    routes = [
        Route("/v1/chat/completions", guarded(service.chat), methods=["POST"]),
        Route("/v1/models", guarded(service.models), methods=["GET"]),
        Route("/v1/models/{model_id:path}", guarded(service.model), methods=["GET"]),
        Route("/health", service.health, methods=["GET"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:  # the server stops: every session's REPL and workers end
            count = service.sessions.open_count
            await service.sessions.close_all()
            if count:
                log.info("closed %d open session%s", count, "" if count == 1 else "s")

    app = Starlette(
        routes=routes,
        exception_handlers={404: not_found, 405: not_found, Exception: internal_error},
        lifespan=lifespan,
    )
    app.state.service = service
    return app
