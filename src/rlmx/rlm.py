"""The public entry point: `RLM(...).run(question, context)` (sync) / `await RLM(...).arun(...)`."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlmx.answer import Answer
from rlmx.context.context import Context
from rlmx.context.prefilter import Prefilter
from rlmx.engine.ledger import Ledger, SharedBudget
from rlmx.engine.node import Node
from rlmx.engine.profiles import SYSTEM_PROMPT_VERSION, PromptProfile
from rlmx.engine.result import NodeResult, RunResult
from rlmx.engine.runtime import UnwaitedExecutor, budget_warnings, unpriced_warning
from rlmx.engine.tree import Models, Pricer, RunTree, check_budget_for_first_call
from rlmx.errors import ConfigError, RLMError
from rlmx.limits import HistorySettings, Limits
from rlmx.lm.base import LM, BaseLM
from rlmx.lm.cache import ResponseCache, open_cache, with_cache
from rlmx.lm.registry import ModelOptions, resolve_model
from rlmx.paths import search_cache_dir, trace_dir
from rlmx.sandbox.base import SandboxFactory, SandboxSettings
from rlmx.tools import TOOL_MAX_BYTES, TOOL_TIMEOUT_S, RunTools
from rlmx.trace.events import RunEnd, RunStart, excerpt
from rlmx.trace.writer import Emitter, Sink, TraceWriter
from rlmx.typed import OutputSpec

if TYPE_CHECKING:
    from rlmx.engine.session import SessionRun
    from rlmx.session import AsyncSession, Session

__all__ = ["RLM", "RunResult", "UnwaitedExecutor", "budget_warnings", "unpriced_warning"]


def _spec_key(spec: Any) -> Any:
    return spec if spec is None or isinstance(spec, (str, bool, Path)) else id(spec)


def make_sandbox_factory(settings: SandboxSettings) -> Callable[[], SandboxFactory]:
    """Each run calls the result once for its own sandboxes (one zygote a run); `SandboxSettings` has
    already refused an unknown backend."""
    from rlmx.sandbox import open_sandboxes

    return lambda: open_sandboxes(settings)


@dataclass
class RLM:
    """A Recursive Language Model. `model`/`sub_model` are model strings (`provider:model`) or LM objects."""

    model: str | LM
    sub_model: str | LM | None = None
    limits: Limits = field(default_factory=Limits)
    trace: bool | str | Path | None = True  # True: a new file under the state dir; a path; False/None: off
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    history: HistorySettings = field(default_factory=HistorySettings)
    models_by_depth: dict[int, str | LM] = field(default_factory=dict)
    model_options: ModelOptions = field(default_factory=ModelOptions)
    # how to reach the sub-model and the models of depths >= 1 given as strings, e.g. their sampling
    # settings (ModelOptions(temperature=...)); None: `model_options`, as for the root
    sub_model_options: ModelOptions | None = None
    pricer: Pricer | None = None  # None: genai-prices; Pricing(overrides) adds prices (rlmx.pricing)
    on_event: Sink | list[Sink] | None = None
    excerpt_chars: int = 2_000  # cap of message excerpts in the trace; 0 keeps whole texts (--trace-full)
    allow_unpriced: bool = False  # with max_cost_usd: run even when a model has no known price
    cache: ResponseCache | str | Path | bool | None = None  # True: the default file; a path; a ResponseCache
    # "bm25:50": before the loop, narrow the context to the 50 chunks that best match the question
    # (also "vector:K", "hybrid:K"; see rlmx.context.prefilter). None: the model sees the whole context.
    prefilter: str | Prefilter | None = None
    # a context that was given but holds no usable text (binary or empty files, nothing matched, empty
    # stdin) is refused with EmptyContext before any model call, unless this is True
    allow_empty_context: bool = False
    # what the root model is told and the shape of its messages: "rlmx" (FINAL and the `answer` dict),
    # "official" (the official RLM repository's contract, for checkpoints trained on it), or a template
    # file's path (see rlmx.engine.profiles); `system_prompt_append` is added to any of them
    prompt: str | PromptProfile = "rlmx"
    system_prompt_append: str = ""
    # the user's tools in the REPL, checked here (docs/tools.md): name -> a callable (run on the host), a
    # JSON value, {"tool": obj, "description": ...} or a Tool; children get `sub_tools` when given
    tools: Any = None
    sub_tools: Any = None
    tool_timeout_s: float = TOOL_TIMEOUT_S
    tool_max_bytes: int = TOOL_MAX_BYTES

    def __post_init__(self) -> None:
        self._resolve_models()
        self._profile = PromptProfile.of(self.prompt, append=self.system_prompt_append)
        self._tools = self._run_tools()
        self._sandbox_factory = make_sandbox_factory(self.sandbox)
        self._warm_up()

    def _run_tools(self) -> RunTools:
        self._tools_from = (id(self.tools), id(self.sub_tools), self.tool_timeout_s, self.tool_max_bytes)
        return RunTools.of(
            self.tools, self.sub_tools, timeout_s=self.tool_timeout_s, max_bytes=self.tool_max_bytes
        )

    def _model_specs(self) -> tuple[Any, ...]:
        """What the models are made from; assigning any of these after construction takes effect at
        the next run (strings compare by value, LM objects and settings by identity)."""
        by_depth = tuple(sorted((int(d), _spec_key(m)) for d, m in self.models_by_depth.items()))
        return (
            _spec_key(self.model),
            _spec_key(self.sub_model),
            by_depth,
            id(self.model_options),
            id(self.sub_model_options),
            _spec_key(self.cache),
        )

    def _resolve_models(self) -> None:
        cache = self.cache if isinstance(self.cache, ResponseCache) else open_cache(self.cache)
        # one LM object per model string and options: one concurrency limit per model
        resolved: dict[tuple[str, int], BaseLM] = {}

        def lm(spec: str | LM, options: ModelOptions) -> BaseLM:
            if not isinstance(spec, str):
                return with_cache(spec, cache)
            if (spec, id(options)) not in resolved:
                resolved[spec, id(options)] = with_cache(resolve_model(spec, options), cache)
            return resolved[spec, id(options)]

        sub_options = self.model_options if self.sub_model_options is None else self.sub_model_options
        root = lm(self.model, self.model_options)
        if self.sub_model is None and sub_options is self.model_options:
            sub = root
        else:  # the root model with the sub-model's options is a model object of its own
            sub = lm(self.model if self.sub_model is None else self.sub_model, sub_options)
        by_depth = {
            int(d): lm(m, self.model_options if int(d) == 0 else sub_options)
            for d, m in self.models_by_depth.items()
        }
        self._models = Models(root=root, sub=sub, by_depth=by_depth)
        self._resolved_from = self._model_specs()

    def _warm_up(self) -> None:
        """First-use costs paid here rather than inside the first run: the price catalog's import and
        its lookup of each model (a miss is remembered by the default pricer), and the sandbox backend's
        modules (~40 ms together before the first model request otherwise)."""
        from rlmx.pricing import Pricing, default_pricing, is_priced

        pricer = self.pricer if self.pricer is not None else default_pricing()
        if isinstance(pricer, Pricing):  # a caller's own pricer is only called when a run needs it
            for lm in (self._models.root, self._models.sub, *self._models.by_depth.values()):
                is_priced(pricer, lm.name)
        if self.sandbox.backend in ("process", "process-unisolated"):
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

    def run(self, question: str, context: Any = None, *, output: Any = None) -> RunResult:
        """Synchronous wrapper around `arun`. Returns at the run's deadline even when a thread the run
        started is still stuck (a DNS lookup, an in-process model): the loop does not wait for it."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._arun_own_loop(question, context, output))
        raise RuntimeError("RLM.run() was called inside a running event loop; use `await rlm.arun(...)`")

    async def _arun_own_loop(self, question: str, context: Any, output: Any) -> RunResult:
        asyncio.get_running_loop().set_default_executor(UnwaitedExecutor())
        return await self.arun(question, context, output=output)

    async def aclose(self) -> None:
        """Close the HTTP connections this RLM's models opened in the running event loop. Only needed
        on a loop you run and close yourself: `run()` and `asyncio.run(rlm.arun(...))` close them as
        their loop ends. The next run opens new ones."""
        closed: set[int] = set()
        for lm in (self._models.root, self._models.sub, *self._models.by_depth.values()):
            if id(lm) not in closed:
                closed.add(id(lm))
                await lm.aclose()

    def _trace_path(self, run_id: str) -> Path | None:
        if self.trace is None or self.trace is False:
            return None
        if self.trace is True:
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
            return trace_dir() / f"{stamp}-{run_id}.jsonl"
        return Path(self.trace)

    async def arun(
        self,
        question: str,
        context: Any = None,
        *,
        context_note: str | None = None,
        output: Any = None,
        run_id: str | None = None,
        session: SessionRun | None = None,
        shared: SharedBudget | None = None,
        trace_to: str | Path | None = None,
    ) -> RunResult:
        """Answer `question` about `context`. `output`: a pydantic type, a JSON schema dict or an
        `rlmx.typed.OutputSpec`; the answer is then validated (see rlmx.typed) and parsed into `.parsed`.
        `session` (given by `rlmx.session`): the run is a question of that session, in its REPL.
        `shared` (given by `rlmx.batch`): limits shared with other runs, checked before each call.
        `trace_to`: this run's trace file, instead of the one `trace` names (unless tracing is off)."""
        if not isinstance(question, str) or not question.strip():
            raise ConfigError("the question must be a non-empty string")
        output_spec = OutputSpec.of(output)
        if self._model_specs() != self._resolved_from:  # rlm.model = ... after construction
            self._resolve_models()
        if (id(self.tools), id(self.sub_tools), self.tool_timeout_s, self.tool_max_bytes) != self._tools_from:
            self._tools = self._run_tools()
        ctx = Context.of(context)  # a value, a Context (files, folders), or pathlib paths
        if context is not None and not self.allow_empty_context:
            ctx.check_usable()
        pricer, unpriced = self._pricer()
        started = time.monotonic()
        run_id = run_id or uuid.uuid4().hex[:12]  # a server may choose it, to name the run before it starts
        trace_path = self._trace_path(run_id)
        if trace_path is not None and trace_to is not None:
            trace_path = Path(trace_to)
        if session:
            trace_path = session.trace_file(trace_path, given=self.trace is not True)
        sinks: list[Sink] = []
        writer = TraceWriter(trace_path) if trace_path else None
        if writer:
            sinks.append(writer)
        if self.on_event:
            sinks.extend(self.on_event if isinstance(self.on_event, list) else [self.on_event])
        emitter = Emitter(sinks)
        ledger = Ledger(self.limits, parent=session.ledger if session else None)
        # this run's REPLs (the process backends share one zygote); a session's outlive the run
        sandboxes = session.sandboxes if session else self._sandbox_factory()
        tree = RunTree(
            limits=self.limits,
            models=self._models,
            ledger=ledger,
            emitter=emitter,
            sandbox_factory=sandboxes,
            sandbox_settings=self.sandbox,
            history_settings=self.history,
            pricer=pricer,
            excerpt_chars=self.excerpt_chars,
            profile=self._profile,
            tools=self._tools,
            shared=shared,
        )
        meta = ctx.describe(note=context_note)  # for files: from the scan; the worker then measures exactly
        payload = session.payload if session and session.payload else None
        if payload is None:
            payload = ctx.payload(
                query=question, prefilter=self.prefilter, note=context_note, cache_dir=search_cache_dir()
            )
        if session:
            session.payload = payload  # the same object every question: workers inherit the zygote's copy
        root = Node(
            tree,
            depth=0,
            question=question,
            payload=payload,
            meta=meta,
            parent_id=None,
            output=output_spec,
            check_loaded=None if context is None or self.allow_empty_context else ctx.check_loaded,
            repl=session.repl if session else None,
            note=session.note if session else "",
        )
        if session:
            session.root = root
        check_budget_for_first_call(tree, question, meta, output_spec)
        emitter.emit(
            RunStart(
                id=root.id,
                run_id=run_id,
                trace_path=str(trace_path) if trace_path else None,
                question=excerpt(question, self.excerpt_chars),
                unpriced_models=unpriced,
                warnings=budget_warnings(unpriced, self.limits),
                model=self._models.root.name,
                sub_model=self._models.sub.name,
                limits=vars(self.limits),
                sandbox=vars(self.sandbox),
                context_meta=meta,
                prompt_version=SYSTEM_PROMPT_VERSION,
                prompt_profile=self._profile.name,
                sampling=self._sampling_record(),
                output_schema=output_spec.schema if output_spec else None,
                session_id=session.id if session else None,
            )
        )
        try:
            try:
                result = await self._run_root(root, ledger)
            except RLMError as exc:  # refused once under way (a context found empty when read)
                self._end_record(
                    emitter,
                    root,
                    NodeResult(Answer.none(str(exc)), "error", root.iteration, str(exc)),
                    ledger,
                    started,
                )
                raise
            except (asyncio.CancelledError, KeyboardInterrupt):
                # Ctrl-C (asyncio.run cancels the run) or a caller's cancellation: the trace still ends
                self._end_record(
                    emitter,
                    root,
                    NodeResult(Answer.none("interrupted"), "interrupted", root.iteration, "interrupted"),
                    ledger,
                    started,
                )
                raise
            usage = self._end_record(emitter, root, result, ledger, started)
        finally:
            if session is None:
                await sandboxes.aclose()
            if writer:
                writer.close()
        return RunResult(
            answer=result.answer.value,
            stopped_by=result.stopped_by,
            iterations=result.iterations,
            usage=usage,
            trace_path=str(trace_path) if trace_path else None,
            elapsed_s=time.monotonic() - started,
            error=result.error,
            run_id=run_id,
            parsed=result.answer.parsed,
            answer_source=result.answer.source,
        )

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

    def _end_record(
        self, emitter: Emitter, root: Node, result: NodeResult, ledger: Ledger, started: float
    ) -> dict[str, Any]:
        usage = ledger.usage_dict()
        emitter.emit(
            RunEnd(
                parent_id=root.id,
                depth=0,
                stopped_by=result.stopped_by,
                iterations=result.iterations,
                answer=excerpt(result.answer.text(), self.excerpt_chars) if result.answer.given else None,
                answer_source=result.answer.source,
                error=result.error,
                usage=usage,
                elapsed_s=round(time.monotonic() - started, 3),
            )
        )
        return usage

    def _pricer(self) -> tuple[Pricer, list[str]]:
        """The run's pricer and the models it cannot price. Under `max_cost_usd` an unpriced model means
        the budget cannot be enforced: refused unless `allow_unpriced`."""
        from rlmx.pricing import default_pricing, is_priced

        pricer = self.pricer if self.pricer is not None else default_pricing()
        models = (self._models.root, self._models.sub, *self._models.by_depth.values())
        names = dict.fromkeys(lm.name for lm in models)
        unpriced = [name for name in names if not is_priced(pricer, name)]
        if unpriced and self.limits.max_cost_usd is not None and not self.allow_unpriced:
            raise ConfigError(unpriced_warning(unpriced, self.limits, refused=True))
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
