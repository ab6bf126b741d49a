"""`RLM`: the official package's class (`rlm.RLM`, `rlms` 0.1.3) over rlmx. Each `completion` is one
rlmx run (or, with `persistent=True`, one question of an rlmx session: one REPL across calls) under the
official runtime's strict contract (`rlmx.engine.dialect.StrictOfficialDialect`); its limits raise the
official exceptions. See docs/migrating-from-rlms.md for every parameter and what differs."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

from rlmx.compat.rlms.clients import Backend, backend_model
from rlmx.compat.rlms.core.limits import raise_for, run_limits
from rlmx.compat.rlms.core.prompt import profile_for
from rlmx.compat.rlms.core.trajectory import Trajectory
from rlmx.compat.rlms.core.types import RLMChatCompletion, RLMMetadata, without_keys
from rlmx.compat.rlms.environments import environment_of, tool_set
from rlmx.compat.rlms.logger import RLMLogger, VerbosePrinter
from rlmx.compat.rlms.utils.exceptions import CancellationError
from rlmx.engine.threads import UnwaitedExecutor
from rlmx.errors import InvalidSettings, ModelError
from rlmx.limits import HistorySettings
from rlmx.lm.base import DEFAULT_CONTEXT_WINDOW, CallSettings, context_window_for
from rlmx.lm.registry import resolve_model
from rlmx.spec.base import ModelRef

T = TypeVar("T")
PERSISTENT_ENVIRONMENTS = ("local", "ipython", "docker")
NEVER_COMPACTED = 10**15  # tokens: the window a history without compaction is measured against
OFFICIAL_DEFAULT_WINDOW = 128_000  # the official's context limit for a model it does not list


def off_the_loop(work: Callable[[], T]) -> T:
    """`work()` here, or in a thread of its own when this thread runs an event loop (a notebook's): the
    official API is synchronous and works there too."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work()
    with ThreadPoolExecutor(1, thread_name_prefix="rlmx-compat") as pool:
        return pool.submit(work).result()


def load_env_file() -> None:
    """A `.env` file's variables, as the official package loads them on import (when python-dotenv is
    installed; variables already set are kept)."""
    try:
        from dotenv import load_dotenv
    except ImportError:
        return
    load_dotenv()


def history_settings(compaction: bool, threshold: float, model: str) -> HistorySettings:
    """Compaction once the history reaches `threshold` of the model's window (rlmx's figure for a
    model it knows, else 128,000 tokens as officially); without `compaction`, never (a window no
    history reaches). The threshold is carried by the window, so any share > 0 works as officially."""
    if not compaction:
        return HistorySettings(compact_at=1.0, context_window=NEVER_COMPACTED)
    window = context_window_for(model)
    if window == DEFAULT_CONTEXT_WINDOW:
        window = OFFICIAL_DEFAULT_WINDOW
    return HistorySettings(compact_at=1.0, context_window=max(1, int(threshold * window)))


def no_price(model: str, usage: Any) -> float | None:
    """The official counts only what a provider reports a call cost; rlmx's price catalog stays out."""
    return None


class RLM:
    """A Recursive Language Model with the official constructor; `completion(prompt, root_prompt=None)`."""

    def __init__(
        self,
        backend: str = "openai",
        backend_kwargs: dict[str, Any] | None = None,
        environment: str = "local",
        environment_kwargs: dict[str, Any] | None = None,
        depth: int = 0,
        max_depth: int = 1,
        max_iterations: int = 30,
        max_budget: float | None = None,
        max_timeout: float | None = None,
        max_tokens: int | None = None,
        max_errors: int | None = None,
        custom_system_prompt: str | None = None,
        other_backends: list[str] | None = None,
        other_backend_kwargs: list[dict[str, Any]] | None = None,
        logger: RLMLogger | None = None,
        verbose: bool = False,
        persistent: bool = False,
        custom_tools: dict[str, Any] | None = None,
        custom_sub_tools: dict[str, Any] | None = None,
        compaction: bool = False,
        compaction_threshold_pct: float = 0.85,
        max_concurrent_subcalls: int = 4,
        on_subcall_start: Callable[[int, str, str], None] | None = None,
        on_subcall_complete: Callable[[int, str, float, str | None], None] | None = None,
        on_iteration_start: Callable[[int, int], None] | None = None,
        on_iteration_complete: Callable[[int, int, float], None] | None = None,
        sampling_args: dict[str, Any] | None = None,
        sub_sampling_args: dict[str, Any] | None = None,
        orchestrator: bool = True,
        user_prologue: str | None = None,
    ) -> None:
        if sampling_args is not None:  # into the root backend's kwargs, as the official does
            backend_kwargs = dict(backend_kwargs or {})
            backend_kwargs["sampling_args"] = {**(backend_kwargs.get("sampling_args") or {}), **sampling_args}
        if sub_sampling_args is not None:  # into the first other backend (the root's, mirrored)
            if other_backends is None:
                other_backends, other_backend_kwargs = [backend], [dict(backend_kwargs or {})]
            else:
                other_backend_kwargs = [dict(kw or {}) for kw in (other_backend_kwargs or [{}])]
            first = dict(other_backend_kwargs[0])
            first["sampling_args"] = {**(first.get("sampling_args") or {}), **sub_sampling_args}
            other_backend_kwargs[0] = first
        if other_backends is not None and len(other_backends) != 1:
            raise InvalidSettings(
                "other_backends: exactly one additional backend is supported (the model of the recursive "
                f"sub-calls), not {len(other_backends)}"
            )
        if not isinstance(compaction_threshold_pct, (int, float)) or compaction_threshold_pct <= 0:
            raise InvalidSettings(
                f"compaction_threshold_pct must be a number > 0 (a share of the model's context window), "
                f"not {compaction_threshold_pct!r}"
            )
        if persistent and environment not in PERSISTENT_ENVIRONMENTS:
            raise InvalidSettings(
                f"persistent=True is not supported for environment type '{environment}'. "
                f"Supported environments: {sorted(PERSISTENT_ENVIRONMENTS)}"
            )
        self.backend = backend
        self.backend_kwargs = backend_kwargs
        self.environment_type = environment
        self.environment_kwargs = dict(environment_kwargs or {})
        self.other_backends = other_backends
        self.other_backend_kwargs = other_backend_kwargs
        self.custom_tools = custom_tools
        self.custom_sub_tools = custom_sub_tools if custom_sub_tools is not None else custom_tools
        self.compaction = compaction
        self.compaction_threshold_pct = compaction_threshold_pct
        self.max_concurrent_subcalls = max_concurrent_subcalls
        self.depth = depth
        self.max_depth = max_depth
        self.max_iterations = max_iterations
        self.max_budget = max_budget
        self.max_timeout = max_timeout
        self.max_tokens = max_tokens
        self.max_errors = max_errors
        self.system_prompt = custom_system_prompt
        self.orchestrator = orchestrator
        self.user_prologue = user_prologue
        self.logger = logger
        self.verbose = VerbosePrinter(enabled=verbose)
        self.on_subcall_start = on_subcall_start
        self.on_subcall_complete = on_subcall_complete
        self.on_iteration_start = on_iteration_start  # accepted; rlms 0.1.3 never calls them either
        self.on_iteration_complete = on_iteration_complete
        self.persistent = persistent
        self._engine: Any = None  # the rlmx RLM, made at the first completion (as the official's clients)
        self._session: Any = None
        self._trajectory: Trajectory | None = None
        self._setup_code: str | None = None
        self._children: dict[str, tuple[float, str]] = {}  # a child RLM's start and model, by its id
        if logger is not None or verbose:
            kwargs = backend_kwargs or {}
            metadata = RLMMetadata(
                root_model=kwargs.get("model_name", "unknown"),
                max_depth=max_depth,
                max_iterations=max_iterations,
                backend=backend,
                backend_kwargs=without_keys(kwargs),
                environment_type=environment,
                environment_kwargs=without_keys(self.environment_kwargs),
                other_backends=other_backends,
            )
            if logger is not None:
                logger.log_metadata(metadata)
            self.verbose.print_metadata(metadata)

    # --- the rlmx run behind it ----------------------------------------------------------------------
    def _build(self) -> Any:
        from rlmx.rlm import RLM as Engine

        load_env_file()

        root = backend_model(self.backend, self.backend_kwargs)
        sub: Backend | None = None
        if self.other_backends and self.other_backend_kwargs:
            sub = backend_model(self.other_backends[0], self.other_backend_kwargs[0], role="other_backend")
        env = environment_of(self.environment_type, self.environment_kwargs)
        self._setup_code = env.setup_code
        tools = tool_set(self.custom_tools, isolated=env.isolated, role="custom_tools")
        sub_tools = tool_set(self.custom_sub_tools, isolated=env.isolated, role="custom_sub_tools")
        names = {root.model: root.model_name, **({sub.model: sub.model_name} if sub else {})}
        self._trajectory = Trajectory(names)
        limits, turn_limits = run_limits(self, root)
        return Engine(
            root.engine_model(),
            sub_model=sub.engine_model() if sub else None,
            limits=limits,
            trace=False,
            sandbox=env.sandbox,
            history=history_settings(self.compaction, self.compaction_threshold_pct, root.model),
            pricer=no_price,
            allow_unpriced=True,
            allow_empty_context=True,
            excerpt_chars=0,
            on_event=[self._trajectory, self._callbacks],
            prompt=profile_for(self, tools, turn_limits),
            tools=tools,
            sub_tools=sub_tools,
        )

    def _callbacks(self, event: Any) -> None:
        """The sub-call callbacks, fired as child RLMs start and end, with the official's depth and model
        name (a callback's error is ignored, as officially); `verbose`'s line for each root reply."""
        from rlmx.trace.events import ChildEnd, ChildStart, LMCall, excerpt_text

        names = self._trajectory.names if self._trajectory else {}
        try:
            if isinstance(event, LMCall) and event.depth == 0 and event.purpose in ("root", "final"):
                self.verbose.print_reply(event.iteration or 0, excerpt_text(event.reply))
            elif isinstance(event, ChildStart):
                model = names.get(event.model, event.model)
                self._children[event.id] = (time.perf_counter(), model)
                if self.on_subcall_start:
                    self.on_subcall_start(event.depth + self.depth, model, excerpt_text(event.question)[:80])
            elif isinstance(event, ChildEnd) and self.on_subcall_complete:
                began, model = self._children.pop(event.child_id, (time.perf_counter(), ""))
                self.on_subcall_complete(
                    event.depth + self.depth, model, time.perf_counter() - began, event.error
                )
        except Exception:
            pass

    # --- completion ----------------------------------------------------------------------------------
    def completion(self, prompt: str | dict[str, Any] | list[Any], root_prompt: str | None = None) -> Any:
        """Run the RLM on `prompt` (its context); `root_prompt`, when given, is the question the root
        model sees. Returns an `RLMChatCompletion` (a string at `depth >= max_depth`, as officially)."""
        started = time.perf_counter()
        if self.depth >= self.max_depth:
            return self._plain_answer(prompt)
        if self._engine is None or self._session is None:  # the attributes as they are now, as officially
            self._engine = self._build()
        if self.logger is not None:
            self.logger.clear_iterations()
        assert self._trajectory is not None
        self._trajectory.events.clear()
        try:
            result = off_the_loop(lambda: self._run(prompt, root_prompt or None))  # "": none, as officially
        except KeyboardInterrupt:
            partial = self._trajectory.interrupted_partial()
            raise CancellationError(partial, "Execution cancelled by user (Ctrl+C)") from None
        elapsed = time.perf_counter() - started
        answer = None if result.answer_source == "none" else str(result.answer)  # str(None): "None"
        iterations = self._trajectory.iterations(answer)
        if self.logger is not None:
            for iteration in iterations:
                self.logger.log(iteration)
        raise_for(self, result, self._trajectory, elapsed)
        if result.stopped_by == "error" or answer is None:
            raise ModelError(f"rlmx.compat.rlms: the completion failed: {result.error or 'no answer'}")
        usage = self._trajectory.usage()
        self.verbose.print_final_answer(answer)
        self.verbose.print_summary(result.iterations, elapsed, usage.to_dict())
        return RLMChatCompletion(
            root_model=(self.backend_kwargs or {}).get("model_name", "unknown"),
            prompt=prompt,
            response=answer,
            usage_summary=usage,
            execution_time=elapsed,
            metadata=self.logger.get_trajectory() if self.logger is not None else None,
        )

    def _run(self, prompt: Any, root_prompt: str | None) -> Any:
        engine = self._engine
        if self.persistent:
            first = self._session is None
            if first:
                self._session = engine.session()
            return self._session.ask(root_prompt, prompt, setup_code=self._setup_code if first else None)

        async def run() -> Any:
            asyncio.get_running_loop().set_default_executor(UnwaitedExecutor())
            return await engine.arun(root_prompt, prompt, setup_code=self._setup_code)

        return asyncio.run(run())

    def _plain_answer(self, prompt: Any) -> str:
        """At `depth >= max_depth` the RLM is a plain model call, as in the official package."""
        root = backend_model(self.backend, self.backend_kwargs)
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)

        async def call() -> str:
            model = root.engine_model()
            lm = resolve_model(model.name, model.options) if isinstance(model, ModelRef) else model
            try:
                response = await lm.complete(messages, CallSettings(max_output_tokens=root.max_output_tokens))
            finally:
                close = getattr(lm, "aclose", None)
                if close is not None:
                    await close()
            return response.text

        return off_the_loop(lambda: asyncio.run(call()))

    # --- the end -------------------------------------------------------------------------------------
    def close(self) -> None:
        """End the persistent REPL (with `persistent=True`); harmless otherwise and when repeated."""
        if self._session is not None:
            session, self._session = self._session, None
            off_the_loop(session.close)

    def __enter__(self) -> RLM:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False

    def __del__(self) -> None:
        if getattr(self, "_session", None) is not None and not sys.is_finalizing():
            try:
                self.close()
            except Exception:
                pass
