"""Persistent sessions: several questions, one REPL.

    with rlm.session(context=logs) as s:
        s.ask("Which services time out?")
        s.ask("And which of them also log 5xx errors?", context=more_logs)   # becomes context_1

Every question is a run of its own (its trace file, its `RunResult`, the RLM's `limits`), but the root's
REPL is the session's: variables made for one question are there for the next. Each context given (to
`session()` or to `ask`) is `context_0`, `context_1`, ... in the REPL (`context` names the first); each
earlier question's root messages are `history_0`, `history_1`, ... (`history` is this question's
messages under the `rlmx` profile, `history_0` under `official`). The model is told all of this in each
question's first message, and told when the REPL lost its variables (a crashed worker restarted, or a
question stopped in the middle of a cell).

`limits` given to the session bound the whole session beside each question's own limits: every call is
charged to both ledgers and must fit both (`max_llm_calls`, `max_total_tokens`, `max_cost_usd`, and
`timeout_s` counted from the session's start). The REPL (and its worker processes) ends with the
session: the end of the `with`, `close()`, or `idle_timeout_s` without a question.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from rlmx.context.context import Context
from rlmx.context.metadata import stats_of
from rlmx.context.payload import ContextPayload
from rlmx.engine.ledger import Ledger
from rlmx.engine.repl_handle import ReplHandle
from rlmx.engine.session import SessionRun, session_note
from rlmx.engine.threads import UnwaitedExecutor
from rlmx.errors import InvalidSettings, RLMError
from rlmx.limits import Limits

if TYPE_CHECKING:
    from rlmx.engine.profiles import PromptProfile
    from rlmx.engine.result import RunResult
    from rlmx.sandbox.base import SandboxFactory


class SessionHost(Protocol):
    """What a session asks of the RLM whose questions it holds (`rlmx.rlm.RLM` is one)."""

    allow_empty_context: bool

    @property
    def prompt_profile(self) -> PromptProfile: ...

    def open_sandboxes(self) -> SandboxFactory: ...

    async def arun(
        self,
        question: str | None,
        context: Any = None,
        *,
        output: Any = None,
        session: SessionRun | None = None,
        run_id: str | None = None,
        context_note: str | None = None,
        setup_code: str | None = None,
    ) -> RunResult: ...

    async def aclose(self) -> None: ...


T = TypeVar("T")
UNBOUNDED = Limits(max_llm_calls=sys.maxsize)  # a session without limits of its own still adds up usage


class SessionClosed(RLMError):
    """A question was asked of a session that was closed (or expired after its idle timeout)."""


class AsyncSession:
    """A session on the caller's event loop: `async with rlm.asession(ctx) as s: await s.aask(q)`."""

    def __init__(
        self,
        rlm: SessionHost,
        context: Any = None,
        limits: Limits | None = None,
        *,
        idle_timeout_s: float | None = None,
    ) -> None:
        if idle_timeout_s is not None and idle_timeout_s <= 0:
            raise InvalidSettings("session: idle_timeout_s must be > 0 (or None: no idle timeout)")
        self.rlm = rlm
        self.id = secrets.token_hex(16)  # unguessable: a server may hand it to its callers
        self.idle_timeout_s = idle_timeout_s
        self.results: list[RunResult] = []
        self.contexts: list[Context] = []
        self._stats: list[dict[str, Any]] = []  # each context's shape, for the model's note
        self.histories = 0  # history_N in the REPL
        self.ledger = Ledger(limits or UNBOUNDED, scope="session ")
        sandboxes = rlm.open_sandboxes()  # the session's zygote, shared by every question's REPLs
        self.state = SessionRun(self.id, self.ledger, sandboxes, ReplHandle(sandboxes(), keep=True))
        self.closed_why: str | None = None
        self._previous: list[dict[str, Any]] | None = None  # the last question's root messages
        self._restarts_seen = 0
        self._dropped_told = 0
        self._lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._ending: asyncio.Task[None] | None = None
        if context is not None:
            self._keep(self._checked(context))

    # --- questions ----------------------------------------------------------------------------------
    async def aask(
        self,
        question: str | None,
        context: Any = None,
        *,
        output: Any = None,
        run_id: str | None = None,
        context_note: str | None = None,
        setup_code: str | None = None,
    ) -> RunResult:
        """Ask the next question in the session's REPL; `context`, when given, is added first (the
        next `context_N`). `question` None: that context holds the task. `run_id` and `context_note` as
        for `RLM.arun` (a server names its runs); `setup_code` runs in the REPL before the first turn of
        the session's first question (later questions find what it made)."""
        self._check_open()
        async with self._lock:
            self._check_open()
            self._disarm()
            try:
                if context is not None:
                    await self._add(context)
                await self._new_question()
                result = await self.rlm.arun(
                    question,
                    self._described(),
                    output=output,
                    session=self.state,
                    run_id=run_id,
                    context_note=context_note,
                    setup_code=setup_code if not self.results else None,
                )
                self._previous = self.state.last_messages()
                self._restarts_seen = self.state.repl.restarts  # restarts in its cells were told there
                self.results.append(result)
                return result
            finally:
                self._arm()

    def _described(self) -> Context | None:
        """The context a question's opening describes: the first (`context`), or the latest under a
        dialect that describes the one the question brought (the strict official)."""
        if not self.contexts:
            return None
        return self.contexts[-1] if self.rlm.prompt_profile.dialect.notes_in_turns else self.contexts[0]

    async def add_context(self, value: Any) -> int:
        """Add a context to the REPL now (it is `context_N`); returns N. Files are read here, in the
        host: the isolated worker cannot read them."""
        self._check_open()
        async with self._lock:
            return await self._add(value)

    async def _add(self, value: Any) -> int:
        ctx = self._checked(value)
        if not self.contexts and not self.state.started:  # the REPL has not started: it starts with it
            return self._keep(ctx)
        loaded = await asyncio.to_thread(ctx.load)
        index = len(self.contexts)
        await self.state.repl.put(f"context_{index}", ContextPayload.of(loaded))
        self.contexts.append(ctx)
        self._stats.append(stats_of(loaded))
        return index

    def _checked(self, value: Any) -> Context:
        ctx = Context.of(value)
        if not self.rlm.allow_empty_context:
            ctx.check_usable()
        return ctx

    def _keep(self, ctx: Context) -> int:
        self.contexts.append(ctx)
        self._stats.append(ctx.stats())
        self.state.context = ctx
        return 0

    async def _new_question(self) -> None:
        """The previous question's messages become `history_N`, `history` starts empty, and this
        question's note says what the REPL holds."""
        repl = self.state.repl
        if self._previous is not None:
            await repl.put(f"history_{self.histories}", ContextPayload.of(self._previous))
            self.histories += 1
            self._previous = None
            await repl.put("history", ContextPayload.of([]))
        restarted = repl.restarts > self._restarts_seen or repl.dropped > self._dropped_told
        self._restarts_seen, self._dropped_told = repl.restarts, repl.dropped
        self.state.question = len(self.results) + 1
        self.state.note = session_note(
            question=len(self.results),
            contexts=self._stats if self.contexts else [],
            histories=self.histories,
            dialect=self.rlm.prompt_profile.dialect,
            restarted=restarted,
        )
        self.state.turn_note = self.rlm.prompt_profile.dialect.turn_notes(len(self.contexts), self.histories)

    # --- usage and the end --------------------------------------------------------------------------
    @property
    def usage(self) -> dict[str, Any]:
        """The whole session's usage so far (every question's calls), as `RunResult.usage`."""
        return self.ledger.usage_dict()

    @property
    def closed(self) -> bool:
        return self.closed_why is not None

    def _check_open(self) -> None:
        if self.closed_why is not None:
            raise SessionClosed(f"session {self.id} is {self.closed_why}")

    def _arm(self) -> None:
        if self.idle_timeout_s is not None and self.closed_why is None:
            self._timer = asyncio.get_running_loop().call_later(self.idle_timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        if self.closed_why is None:
            self.closed_why = f"closed: idle for {self.idle_timeout_s:g} s"
            self._ending = asyncio.ensure_future(self._shutdown())

    async def aclose(self) -> None:
        """End the session: its REPL and worker processes are stopped. Closing twice is harmless."""
        self._disarm()
        if self.closed_why is None:
            self.closed_why = "closed"
            self._ending = asyncio.ensure_future(self._shutdown())
        if self._ending is not None:
            await asyncio.shield(self._ending)

    async def _shutdown(self) -> None:
        async with self._lock:
            try:
                await self.state.repl.shutdown()
            finally:
                try:
                    await self.state.sandboxes.aclose()
                finally:
                    if self.state.mcp is not None:
                        await self.state.mcp.aclose()

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class Session:
    """A session for synchronous code: its questions run on an event loop of its own, in a thread,
    so the REPL stays alive (and an idle timeout can fire) between them."""

    def __init__(
        self,
        rlm: SessionHost,
        context: Any = None,
        limits: Limits | None = None,
        *,
        idle_timeout_s: float | None = None,
    ) -> None:
        self._inner = AsyncSession(rlm, context, limits, idle_timeout_s=idle_timeout_s)
        self._loop = asyncio.new_event_loop()
        self._loop.set_default_executor(UnwaitedExecutor())
        self._thread = threading.Thread(target=self._loop.run_forever, name="rlmx-session", daemon=True)
        self._thread.start()

    @property
    def id(self) -> str:
        return self._inner.id

    @property
    def usage(self) -> dict[str, Any]:
        return self._inner.usage

    @property
    def results(self) -> list[RunResult]:
        return self._inner.results

    @property
    def closed(self) -> bool:
        return self._inner.closed

    @property
    def contexts(self) -> list[Context]:
        return self._inner.contexts

    def ask(
        self, question: str | None, context: Any = None, *, output: Any = None, setup_code: str | None = None
    ) -> RunResult:
        return self._call(self._inner.aask(question, context, output=output, setup_code=setup_code))

    def add_context(self, value: Any) -> int:
        return self._call(self._inner.add_context(value))

    def close(self) -> None:
        """End the session (its REPL and workers), close the models' connections and the loop."""
        if not self._thread.is_alive():
            return
        try:
            self._call(self._inner.aclose())
        finally:
            self._call(self._inner.rlm.aclose())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self._loop.close()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop.is_closed():
            coro.close()
            self._inner._check_open()
            raise SessionClosed(f"session {self.id} is closed")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coro.close()
            raise RuntimeError("Session was used inside a running event loop; use `rlm.asession(...)`")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except KeyboardInterrupt:  # Ctrl-C: the question is cancelled (its trace ends), then it goes on
            future.cancel()
            try:
                future.result(10)
            except BaseException:
                pass
            raise

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
