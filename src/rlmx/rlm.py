"""The public entry point: `RLM(...).run(question, context)` (sync) / `await RLM(...).arun(...)`."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlmx.answer import Answer
from rlmx.context.context import Context
from rlmx.context.payload import ContextPayload
from rlmx.engine.ledger import Ledger, SharedBudget
from rlmx.engine.node import Node
from rlmx.engine.prepare import (
    check_question,
    models_key,
    sinks_of,
    spec_key,
    tool_refs,
    tools_key,
    trace_file,
)
from rlmx.engine.profiles import SYSTEM_PROMPT_VERSION, PromptProfile
from rlmx.engine.result import NodeResult, RunResult
from rlmx.engine.run_state import Models, Pricer, RunState, check_budget_for_first_call
from rlmx.engine.threads import UnwaitedExecutor
from rlmx.errors import ConfigError, RLMError
from rlmx.limits import Limits
from rlmx.lm.base import BaseLM
from rlmx.lm.cache import ResponseCache, open_cache, with_cache
from rlmx.lm.registry import ModelOptions, resolve_model
from rlmx.paths import search_cache_dir
from rlmx.pricing import budget_warnings, unpriced_warning
from rlmx.sandbox.base import SandboxFactory
from rlmx.spec.run import ModelRef, RunSpec
from rlmx.telemetry import run_sinks
from rlmx.tools import RunTools
from rlmx.trace.events import RunEnd, RunStart, excerpt
from rlmx.trace.writer import Emitter, TraceWriter
from rlmx.typed import OutputSpec

log = logging.getLogger("rlmx.run")

if TYPE_CHECKING:
    from rlmx.engine.session import SessionRun
    from rlmx.session import AsyncSession, Session

__all__ = ["RLM", "PreparedRun", "RunResult", "RunSpec"]


@dataclass(eq=False)
class RLM(RunSpec):
    """A Recursive Language Model, made from a `RunSpec`'s fields (see rlmx.spec.run for each one):
    `RLM("openai:gpt-5-mini", limits=Limits(max_iterations=10))`, or `RLM.from_spec(spec)`.

    `rlm.spec` is a snapshot of the current fields; assigning a field (`rlm.limits = ...`) takes
    effect at the next run, and each run reads one snapshot taken as it starts."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._resolve_models(self.snapshot())
        self._profile = PromptProfile.of(self.prompt, append=self.system_prompt_append)
        self._profile_from = (spec_key(self.prompt), self.system_prompt_append)
        self._tools = self._run_tools(self.snapshot())
        self._warm_up()

    @classmethod
    def from_spec(cls, spec: RunSpec) -> RLM:
        """An RLM of `spec`'s fields (the spec is not changed by later assignments to the RLM)."""
        return cls(**spec.fields())

    @property
    def spec(self) -> RunSpec:
        """The fields as they are now, as a `RunSpec` (`spec.to_data()` for its data)."""
        return self.snapshot()

    @property
    def prompt_profile(self) -> PromptProfile:
        """The prompt profile the next run uses (its dialect, its texts)."""
        self._refresh_profile(self.snapshot())
        return self._profile

    def open_sandboxes(self) -> SandboxFactory:
        """The sandboxes of one run or session: one zygote for all of its REPLs (`SandboxSettings`
        has already refused an unknown backend); closed with `await factory.aclose()`."""
        from rlmx.sandbox import open_sandboxes

        return open_sandboxes(self.sandbox)

    # --- what a run is built from, made again when the fields it comes from were reassigned ---------

    def _run_tools(self, spec: RunSpec) -> RunTools:
        self._tools_from = tools_key(spec)
        tools, sub_tools = spec.tools, spec.sub_tools
        refs, sub_refs = tool_refs(tools), tool_refs(sub_tools)
        if refs is not None or sub_refs is not None:  # MODULE:ATTR references, imported here
            from rlmx.tools import load_all

            tools = load_all(refs) if refs is not None else tools
            sub_tools = load_all(sub_refs) if sub_refs is not None else sub_tools
        return RunTools.of(tools, sub_tools, timeout_s=spec.tool_timeout_s, max_bytes=spec.tool_max_bytes)

    def _refresh_profile(self, spec: RunSpec) -> None:
        if (spec_key(spec.prompt), spec.system_prompt_append) != self._profile_from:
            self._profile = PromptProfile.of(spec.prompt, append=spec.system_prompt_append)
            self._profile_from = (spec_key(spec.prompt), spec.system_prompt_append)

    def _resolve_models(self, spec: RunSpec) -> None:
        cache = spec.cache if isinstance(spec.cache, ResponseCache) else open_cache(spec.cache)
        # one LM object per model string and options: one concurrency limit per model
        resolved: dict[tuple[str, int], BaseLM] = {}

        def lm(model: Any, options: ModelOptions) -> BaseLM:
            if isinstance(model, ModelRef):
                model, options = model.name, model.options
            if not isinstance(model, str):
                return with_cache(model, cache)
            if (model, id(options)) not in resolved:
                resolved[model, id(options)] = with_cache(resolve_model(model, options), cache)
            return resolved[model, id(options)]

        options = spec.model_options
        sub_options = options if spec.sub_model_options is None else spec.sub_model_options
        root = lm(spec.model, options)
        if spec.sub_model is None and sub_options is options:
            sub = root
        else:  # the root model with the sub-model's options is a model object of its own
            sub = lm(spec.model if spec.sub_model is None else spec.sub_model, sub_options)
        by_depth = {
            int(d): lm(m, options if int(d) == 0 else sub_options) for d, m in spec.models_by_depth.items()
        }
        self._models = Models(root=root, sub=sub, by_depth=by_depth)
        self._resolved_from = models_key(spec)

    def _warm_up(self) -> None:
        """First-use costs paid here rather than inside the first run: the price catalog's import and
        its lookup of each model (a miss is remembered by the default pricer), and the sandbox backend's
        modules (~40 ms together before the first model request otherwise)."""
        from rlmx.pricing import Pricing, default_pricing, is_priced

        pricer = self.pricer if self.pricer is not None else default_pricing()
        if isinstance(pricer, Pricing):  # a caller's own pricer is only called when a run needs it
            for lm in (self._models.root, self._models.sub, *self._models.by_depth.values()):
                is_priced(pricer, lm.name)
        if self.sandbox.layer:
            import rlmx.sandbox.process  # noqa: F401  (the run's zygote and workers)

    @property
    def model_names(self) -> tuple[str, ...]:
        """The names of the models this RLM calls (root, sub-model, by depth), each once."""
        models = self._models
        return tuple(dict.fromkeys(lm.name for lm in (models.root, models.sub, *models.by_depth.values())))

    def session(
        self, context: Any = None, limits: Limits | None = None, *, idle_timeout_s: float | None = None
    ) -> Session:
        """A conversation whose questions share one REPL: `with rlm.session(ctx) as s: s.ask(q)`.
        `limits`: session-wide bounds beside each question's (see rlmx.session)."""
        from rlmx.session import Session

        return Session(self, context, limits, idle_timeout_s=idle_timeout_s)

    def asession(
        self, context: Any = None, limits: Limits | None = None, *, idle_timeout_s: float | None = None
    ) -> AsyncSession:
        """`session`, for an event loop: `async with rlm.asession(ctx) as s: await s.aask(q)`."""
        from rlmx.session import AsyncSession

        return AsyncSession(self, context, limits, idle_timeout_s=idle_timeout_s)

    def run(self, question: str | None, context: Any = None, *, output: Any = None) -> RunResult:
        """Synchronous wrapper around `arun`. Returns at the run's deadline even when a thread the run
        started is still stuck (a DNS lookup, an in-process model): the loop does not wait for it."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._arun_own_loop(question, context, output))
        raise RuntimeError("RLM.run() was called inside a running event loop; use `await rlm.arun(...)`")

    async def _arun_own_loop(self, question: str | None, context: Any, output: Any) -> RunResult:
        asyncio.get_running_loop().set_default_executor(UnwaitedExecutor())
        return await self.arun(question, context, output=output)

    async def aclose(self) -> None:
        """Close the HTTP connections this RLM's models opened in the running event loop. Only needed
        on a loop you run and close yourself: `run()` and `asyncio.run(rlm.arun(...))` close them as
        their loop ends. The next run opens new ones."""
        pool = getattr(self, "_mcp_pool", None)
        if pool is not None:  # a batch's servers, started by its first item (rlmx.mcp.run.pooled_mcp)
            self._mcp_pool = None
            await pool.aclose()
        closed: set[int] = set()
        for lm in (self._models.root, self._models.sub, *self._models.by_depth.values()):
            if id(lm) not in closed:
                closed.add(id(lm))
                await lm.aclose()

    async def arun(
        self,
        question: str | None,
        context: Any = None,
        *,
        context_note: str | None = None,
        output: Any = None,
        run_id: str | None = None,
        session: SessionRun | None = None,
        shared: SharedBudget | None = None,
        trace_to: str | Path | None = None,
        setup_code: str | None = None,
    ) -> RunResult:
        """Answer `question` about `context` (None: the context holds the task). `output`: a pydantic type, a JSON schema dict or an
        `rlmx.typed.OutputSpec` (default: the spec's `output`); the answer is then validated (see
        rlmx.typed) and parsed into `.parsed`. `session` (given by `rlmx.session`): the run is a question
        of that session, in its REPL. `shared` (given by `rlmx.batch`): limits shared with other runs,
        checked before each call. `trace_to`: this run's trace file, instead of the one `trace` names
        (unless tracing is off). `setup_code`: run in the root's REPL before its first turn."""
        mcp = await self._mcp_for(session, pooled=shared is not None)
        try:
            run = self._prepare(
                question,
                context,
                context_note=context_note,
                output=output,
                run_id=run_id,
                session=session,
                shared=shared,
                trace_to=trace_to,
                mcp=mcp,
            )
            run.root.setup_code = setup_code
            try:
                result = await self._execute(run)
            finally:
                await run.close()
        finally:
            if mcp is not None and session is None and shared is None:
                await mcp.aclose()  # a run's own servers; a session's and a batch's outlive it
        return run.result(result)

    async def _mcp_for(self, session: SessionRun | None, *, pooled: bool) -> Any:
        """The run's MCP servers (None: none configured): started for this run; a session's first
        question starts the session's; a batch's runs share this RLM's, started by the first item."""
        if self.mcp_servers is None:
            return None
        from rlmx.mcp.run import open_mcp, pooled_mcp

        spec = self.snapshot()
        if tools_key(spec) != self._tools_from:  # the names the MCP functions must not take
            self._tools = self._run_tools(spec)

        if session is not None:
            if session.mcp is None:
                session.mcp = await open_mcp(self.mcp_servers, self._tools)
            return session.mcp
        if pooled:
            return await pooled_mcp(self, self.mcp_servers, self._tools)
        return await open_mcp(self.mcp_servers, self._tools)

    def _prepare(
        self,
        question: str | None,
        context: Any,
        *,
        context_note: str | None,
        output: Any,
        run_id: str | None,
        session: SessionRun | None,
        shared: SharedBudget | None,
        trace_to: str | Path | None,
        mcp: Any = None,
    ) -> PreparedRun:
        """Everything a run needs, built from one snapshot of the spec, every refusal made before any
        model call; ends with the `run_start` record."""
        check_question(question, context)
        spec = self.snapshot()
        output_spec = OutputSpec.of(output if output is not None else spec.output)
        if models_key(spec) != self._resolved_from:  # rlm.model = ... after construction
            self._resolve_models(spec)
        if tools_key(spec) != self._tools_from:
            self._tools = self._run_tools(spec)
        self._refresh_profile(spec)
        ctx = Context.of(context)  # a value, a Context (files, folders), or pathlib paths
        if context is not None and not spec.allow_empty_context:
            ctx.check_usable()
        pricer, unpriced = self._pricer(spec)
        started = time.monotonic()
        run_id = run_id or uuid.uuid4().hex[:12]  # a server may choose it, to name the run before it starts
        trace_path = trace_file(spec.trace, run_id, trace_to)
        if session:
            trace_path = session.trace_file(trace_path, given=spec.trace is not True)
        writer = TraceWriter(trace_path) if trace_path else None
        emitter = Emitter(([writer] if writer else []) + sinks_of(spec.on_event) + run_sinks())
        ledger = Ledger(spec.limits, parent=session.ledger if session else None)
        # this run's REPLs (the process backends share one zygote); a session's outlive the run
        sandboxes = session.sandboxes if session else self.open_sandboxes()
        state = RunState(
            limits=spec.limits,
            models=self._models,
            ledger=ledger,
            emitter=emitter,
            sandbox_factory=sandboxes,
            sandbox_settings=spec.sandbox,
            history_settings=spec.history,
            pricer=pricer,
            excerpt_chars=spec.excerpt_chars,
            profile=self._profile,
            tools=mcp.run_tools(self._tools) if mcp is not None else self._tools,
            shared=shared,
        )
        meta = ctx.describe(note=context_note)  # for files: from the scan; the worker then measures exactly
        meta = self._profile.dialect.describe(None if ctx.is_files else ctx.load(), meta)

        def make_payload() -> ContextPayload:
            return ctx.payload(
                query=question, prefilter=spec.prefilter, note=context_note, cache_dir=search_cache_dir()
            )

        # a session's REPL starts once, with the first question's payload (its workers inherit it)
        payload = session.payload_for(make_payload) if session else make_payload()
        root = Node(
            state,
            depth=0,
            question=question,
            payload=payload,
            meta=meta,
            parent_id=None,
            output=output_spec,
            check_loaded=None if context is None or spec.allow_empty_context else ctx.check_loaded,
            repl=session.repl if session else None,
            note=session.note if session else "",
            turn_note=session.turn_note if session else "",
        )
        check_budget_for_first_call(state, root.first_messages())
        run = PreparedRun(
            spec, run_id, trace_path, writer, emitter, ledger, sandboxes, root, started, session
        )
        log.info(
            "run %s: model %s, sub-model %s, prompt %s, trace %s",  # each model@its endpoint
            run_id,
            self._models.root.cache_identity,
            self._models.sub.cache_identity,
            self._profile.name,
            trace_path or "none",
        )
        emitter.emit(
            RunStart(
                id=root.id,
                run_id=run_id,
                trace_path=str(trace_path) if trace_path else None,
                question=excerpt(question, spec.excerpt_chars) if question is not None else None,
                unpriced_models=unpriced,
                warnings=budget_warnings(unpriced, spec.limits) + (mcp.warnings if mcp is not None else []),
                model=self._models.root.name,
                sub_model=self._models.sub.name,
                limits=vars(spec.limits),
                sandbox=vars(spec.sandbox),
                context_meta=meta,
                prompt_version=SYSTEM_PROMPT_VERSION,
                prompt_profile=self._profile.name,
                sampling=self._sampling_record(),
                output_schema=output_spec.schema if output_spec else None,
                session_id=session.id if session else None,
                spec=spec.record(),
            )
        )
        return run

    async def _execute(self, run: PreparedRun) -> NodeResult:
        """The root's loop, then the `run_end` record (also when the run is refused under way or
        interrupted)."""
        try:
            result = await self._run_root(run.root, run.ledger)
        except RLMError as exc:  # refused once under way (a context found empty when read)
            run.end(NodeResult(Answer.none(str(exc)), "error", run.root.iteration, str(exc)))
            raise
        except (asyncio.CancelledError, KeyboardInterrupt):
            # Ctrl-C (asyncio.run cancels the run) or a caller's cancellation: the trace still ends
            run.end(NodeResult(Answer.none("interrupted"), "interrupted", run.root.iteration, "interrupted"))
            raise
        run.end(result)
        if run.session is not None:
            run.session.ran(run.root)
        return result

    def _sampling_record(self) -> dict[str, Any]:
        """The sampling settings each role's model sends (empty where none is set), for `run_start`."""
        from rlmx.lm.sampling import sampling_of

        models = self._models
        record: dict[str, Any] = {
            "root": sampling_of(models.root).body(),
            "sub": sampling_of(models.sub).body(),
        }
        if models.by_depth:
            record["by_depth"] = {str(d): sampling_of(lm).body() for d, lm in sorted(models.by_depth.items())}
        return record

    def _pricer(self, spec: RunSpec) -> tuple[Pricer, list[str]]:
        """The run's pricer and the models it cannot price. Under `max_cost_usd` an unpriced model means
        the budget cannot be enforced: refused unless `allow_unpriced`."""
        from rlmx.pricing import default_pricing, is_priced

        pricer = spec.pricer if spec.pricer is not None else default_pricing()
        models = (self._models.root, self._models.sub, *self._models.by_depth.values())
        names = dict.fromkeys(lm.name for lm in models)
        unpriced = [name for name in names if not is_priced(pricer, name)]
        if unpriced and spec.limits.max_cost_usd is not None and not spec.allow_unpriced:
            raise ConfigError(unpriced_warning(unpriced, spec.limits, refused=True))
        return pricer, unpriced

    async def _run_root(self, root: Node, ledger: Ledger) -> NodeResult:
        """The root's loop, stopped at the end of the working time (the deadline less the final answer's
        reserve); then one call, bounded by the deadline itself, asks for an answer from the history."""
        remaining = ledger.remaining_s()
        if remaining is None:
            return await root.run()
        try:
            return await asyncio.wait_for(root.run(), max(0.0, remaining))
        except asyncio.TimeoutError:
            ledger.timed_out = True
        return await root.answer_after_timeout()


@dataclass
class PreparedRun:
    """One run as `RLM._prepare` built it: what `_execute` runs, what `close` ends, what `result` reads."""

    spec: RunSpec
    run_id: str
    trace_path: Path | None
    writer: TraceWriter | None
    emitter: Emitter
    ledger: Ledger
    sandboxes: SandboxFactory
    root: Node
    started: float
    session: SessionRun | None
    usage: dict[str, Any] = field(default_factory=dict)

    def end(self, result: NodeResult) -> None:
        """The `run_end` record, with the ledger's usage."""
        self.usage = self.ledger.usage_dict()
        self.emitter.emit(
            RunEnd(
                parent_id=self.root.id,
                depth=0,
                stopped_by=result.stopped_by,
                iterations=result.iterations,
                answer=excerpt(result.answer.text(), self.spec.excerpt_chars)
                if result.answer.given
                else None,
                answer_source=result.answer.source,
                error=result.error,
                usage=self.usage,
                elapsed_s=round(time.monotonic() - self.started, 3),
            )
        )

    async def close(self) -> None:
        try:
            if self.session is None:
                await self.sandboxes.aclose()
        finally:
            if self.writer:
                self.writer.close()
            for sink in self.emitter.sinks:  # a run that ended without its run_end: its spans end too
                getattr(sink, "end_open_spans", lambda: None)()

    def result(self, result: NodeResult) -> RunResult:
        return RunResult(
            answer=result.answer.value,
            stopped_by=result.stopped_by,
            iterations=result.iterations,
            usage=self.usage,
            trace_path=str(self.trace_path) if self.trace_path else None,
            elapsed_s=time.monotonic() - self.started,
            error=result.error,
            run_id=self.run_id,
            parsed=result.answer.parsed,
            answer_source=result.answer.source,
            sandbox=self.root.state.sandbox_layer,
            model=self.root.lm.name,
            cells=self.root.state.cells_run,
        )
