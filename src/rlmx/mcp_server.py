"""`rlmx mcp`: an MCP server (official `mcp` SDK, 2.x) with the tools `ask` and `trace`.

`ask` runs an RLM over files and folders under the allowed roots (`--root DIR`; where the client declares
MCP roots, only their intersection with these) and returns the answer, a usage line and the trace path,
with progress notifications while it runs; with `session` ("new", then the id it returns) a caller's
questions share one REPL (rlmx.serve.sessions: bounded in number and idle time). `trace` lists recent runs or summarises one, from this
server's own trace folder only (`--trace-dir`, default `$XDG_STATE_HOME/rlmx/mcp-traces`): the runs of
`rlmx ask` and `rlmx serve` go elsewhere, so a client cannot read other callers' questions and answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import unquote, urlparse

import mcp_types
from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

import rlmx
from rlmx.errors import ConfigError, RLMError
from rlmx.sandbox.base import SandboxSettings
from rlmx.serve.images import context_with_files
from rlmx.serve.profiles import ServedProfile, find_profile
from rlmx.serve.progress import ProgressTracker, usage_line
from rlmx.serve.roots import PathRefused, Roots, usable_context
from rlmx.serve.sessions import NEW, HeldSession, SessionRefused, SessionStore
from rlmx.serve.settings import own_trace_dir, trace_file
from rlmx.serve.trace_text import describe_trace, find_trace, recent_traces
from rlmx.trace.events import Event

INSTRUCTIONS = (
    "rlmx answers questions about very large texts, files and folders (far beyond a model's context window) "
    "with a Recursive Language Model: the content is loaded into a Python REPL that a model explores with "
    "code and sub-model calls. Use the `ask` tool with paths under the allowed roots (or inline text); "
    "runs can take minutes. Use `trace` to see how a run went."
)


@dataclass
class McpSettings:
    profiles: dict[str, ServedProfile]
    roots: Roots = field(default_factory=Roots)
    max_context_bytes: int = 512 * 2**20
    max_running: int = 2
    max_sessions: int = 16  # open sessions at once (0: none)
    session_idle_s: float = 600.0  # a session without a question this long closes
    trace: bool = True
    sandbox: SandboxSettings | None = None  # None: each profile's own (its `sandbox` key, the config's)
    trace_dir: Path = field(default_factory=lambda: own_trace_dir("mcp"))


def client_roots(ctx: Context) -> ListRoots | None:
    """Ask the client for its MCP roots when it declares the capability (resolved before the tool runs)."""
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.roots is None:
        return None
    return ListRoots()


def root_dirs(result: mcp_types.ListRootsResult | None) -> list[Path]:
    if result is None:
        return []
    dirs = []
    for root in result.roots:
        parsed = urlparse(str(root.uri))
        if parsed.scheme == "file":
            dirs.append(Path(unquote(parsed.path)))
    return dirs


class RlmxTools:
    def __init__(self, settings: McpSettings) -> None:
        self.settings = settings
        self.slots = asyncio.Semaphore(settings.max_running)
        self.sessions = SessionStore(settings.max_sessions, settings.session_idle_s)

    def allowed_roots(self, declared: mcp_types.ListRootsResult | None) -> Roots:
        dirs = root_dirs(declared)
        return self.settings.roots.narrowed(dirs) if dirs else self.settings.roots

    def load(self, roots: Roots, paths: list[str], text: str | None) -> Any:
        docs = [{"path": "text", "text": text}] if text else []  # "" is taken as no text at all
        budget = self.settings.max_context_bytes - len(text or "")
        if paths:
            if not roots.dirs and self.settings.roots.dirs:
                raise PathRefused(
                    "none of the server's roots lies inside the roots this client declared", 403
                )
            images: list[tuple[str, Path]] = []
            docs.extend(roots.load(paths, max_bytes=max(budget, 0), images=images))
            if images:  # image files under the roots: image documents, read by the host on demand
                return context_with_files(docs, images)
        return usable_context(docs, given=(["text"] if text else []) + paths)

    async def ask(
        self,
        question: Annotated[str, Field(description="The question to answer about the files or text.")],
        ctx: Context,
        declared: Annotated[mcp_types.ListRootsResult | None, Resolve(client_roots)],
        paths: Annotated[
            list[str] | None,
            Field(
                description="Files or folders to read (relative to an allowed root, or absolute inside one)."
            ),
        ] = None,
        text: Annotated[str | None, Field(description="Inline text to use as (part of) the context.")] = None,
        model: Annotated[
            str | None, Field(description="Profile to use, e.g. rlmx/NAME (default: the first).")
        ] = None,
        max_depth: Annotated[
            int | None, Field(description="Lower the recursion depth: 0 no sub-calls, 1 plain sub-calls.")
        ] = None,
        budget_usd: Annotated[
            float | None, Field(description="Lower the spending limit of this run (USD).")
        ] = None,
        session: Annotated[
            str | None,
            Field(
                description='"new" starts a session whose REPL (the variables the model made) stays for your '
                "next questions; pass the session id this tool returned to ask the next one. This call's "
                "paths and text are added to the session's contexts (context_1, ...)."
            ),
        ] = None,
    ) -> str:
        """Answer a question about large files, folders or text with a Recursive Language Model.

        Returns the answer, then a line with what the run used (model calls, tokens, cost, turns, time),
        the path of its trace and, in a session, the session id."""
        held: HeldSession | None = None
        try:
            profile = find_profile(self.settings.profiles, model)
            limits = profile.limits_for({"max_depth": max_depth, "budget_usd": budget_usd})
            if session is not None and session != NEW:
                held = self.session_of(session, profile)  # an unknown or expired id, before any work
            roots = self.allowed_roots(declared)
            context = await asyncio.to_thread(self.load, roots, paths or [], text)
            if session == NEW:
                held = self.session_of(session, profile)
        except (ConfigError, PathRefused, SessionRefused) as exc:
            raise ToolError(str(exc)) from exc
        tracker = ProgressTracker()
        updates: asyncio.Queue[str | None] = asyncio.Queue()

        def sink(event: Event) -> None:
            snapshot = tracker.update(event)
            if snapshot is not None:
                updates.put_nowait(f"{snapshot['message']} ({tracker.line()})")

        async def report() -> None:
            step = 0
            while (message := await updates.get()) is not None:
                step += 1
                await ctx.report_progress(step, None, message)

        reporter = asyncio.create_task(report())
        run_id = uuid.uuid4().hex[:12]
        trace_to = trace_file(self.settings.trace_dir, run_id) if self.settings.trace else False
        try:
            async with self.slots:
                if held is not None:
                    result = await held.ask(
                        question, context, on_event=sink, limits=limits, trace=trace_to, run_id=run_id
                    )
                else:
                    rlm = profile.rlm(
                        limits=limits, on_event=sink, trace=trace_to, sandbox=self.settings.sandbox
                    )
                    result = await rlm.arun(question, context, run_id=run_id)
        except RLMError as exc:
            if held is not None and not held.session.results:  # a new session whose question never ran
                await self.sessions.drop(held)
            raise ToolError(str(exc)) from exc
        finally:
            updates.put_nowait(None)
            await asyncio.wait({reporter})
        trace = f"trace: {result.trace_path}" if result.trace_path else "trace: off"
        if held is not None:
            trace += f"\nsession: {held.id}"
        if result.answer is None or result.stopped_by == "error":
            raise ToolError(f"the run ended by {result.stopped_by}: {result.error or 'no answer'} ({trace})")
        answer = result.answer if isinstance(result.answer, str) else rlmx_json(result.answer)
        return f"{answer}\n\n---\n{usage_line(result)}\n{trace}"

    def session_of(self, wanted: str, profile: ServedProfile) -> HeldSession:
        settings = self.settings

        def make_rlm() -> Any:
            return profile.rlm(trace=False, sandbox=settings.sandbox)

        return self.sessions.get(wanted, profile, make_rlm)

    async def trace(
        self,
        run: Annotated[
            str | None,
            Field(
                description="A run id (from a trace path) or trace file name; empty lists the recent runs."
            ),
        ] = None,
        turns: Annotated[bool, Field(description="Also list the root's turns and the code it ran.")] = False,
    ) -> str:
        """List this server's recent rlmx runs, or summarise one: question, answer, why it stopped, usage,
        the RLM tree."""
        trace_dir = self.settings.trace_dir
        try:
            if not run:
                return recent_traces(trace_dir)
            return describe_trace(find_trace(run, trace_dir), turns=turns)
        except ConfigError as exc:
            raise ToolError(str(exc)) from exc


def rlmx_json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, default=str)


def build_server(settings: McpSettings) -> MCPServer:
    tools = RlmxTools(settings)

    @contextlib.asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[None]:
        try:
            yield None
        finally:  # the client went away or the server stops: the sessions' REPLs end
            await tools.sessions.close_all()

    server: MCPServer = MCPServer(
        "rlmx", instructions=INSTRUCTIONS, version=rlmx.__version__, log_level="WARNING", lifespan=lifespan
    )
    roots_text = ", ".join(str(d) for d in settings.roots.dirs) or "none (only inline text)"
    profiles_text = ", ".join(p.served_name for p in settings.profiles.values())
    server.add_tool(
        tools.ask,
        name="ask",
        title="Ask about large files (Recursive Language Model)",
        description=f"{(tools.ask.__doc__ or '').strip()}\n\nAllowed roots: {roots_text}. Profiles: {profiles_text}.",
        annotations=mcp_types.ToolAnnotations(
            read_only_hint=True, destructive_hint=False, open_world_hint=True
        ),
    )
    server.add_tool(
        tools.trace,
        name="trace",
        title="Summarise an rlmx run",
        annotations=mcp_types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    return server
