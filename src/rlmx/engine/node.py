"""One RLM at one depth: its own REPL and turns; children are nodes one level down."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar

from rlmx.context.metadata import render
from rlmx.engine import prompts
from rlmx.engine.history import History
from rlmx.engine.parse import FinalLine, parse_reply, prose_of
from rlmx.engine.state import RunState
from rlmx.engine.subcalls import SubCalls, answer_text
from rlmx.errors import BudgetExhausted, ModelError, SandboxError
from rlmx.outcomes import AnswerSource, LimitReason, Purpose, StopReason
from rlmx.sandbox.base import ContextPayload, ExecResult
from rlmx.trace.events import (
    ChildEnd,
    ChildStart,
    Compaction,
    Error,
    Event,
    Exec,
    ExecStart,
    Limit,
    OutputRejected,
    excerpt,
)
from rlmx.trace.events import (
    Final as FinalRecord,
)
from rlmx.typed import OutputSpec

E = TypeVar("E", bound=Event)


class Here(TypedDict):
    parent_id: str | None
    depth: int


@dataclass
class NodeResult:
    answer: Any  # None when the run produced no answer
    stopped_by: StopReason
    iterations: int
    error: str | None = None
    parsed: Any = None  # the typed answer, when an output schema is set
    answer_source: AnswerSource = "none"


@dataclass
class Final:
    answer: Any
    parsed: Any = None
    error: str | None = None  # set when the answer failed the output schema for good
    source: AnswerSource = "final"  # final | final_var: how the model gave it


class Node:
    def __init__(
        self,
        state: RunState,
        *,
        depth: int,
        question: str,
        payload: ContextPayload,
        meta: str,
        parent_id: str | None,
        node_id: str | None = None,
        output: OutputSpec | None = None,
        batch_id: str | None = None,
        check_loaded: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.state = state
        self.check_loaded = check_loaded  # root only: refuses a context found empty once the worker read it
        self.batch_id = batch_id  # the batch (rlm_query_batched) this child belongs to
        self.output = output  # the typed-answer schema (root only)
        self.rejections = 0
        self.depth = depth
        self.question = question
        self.payload = payload
        self.meta = meta
        self.parent_id = parent_id
        self.id = node_id or state.emitter.new_id()
        self.lm = state.models.for_depth(depth)
        self.sub_lm = state.models.for_depth(depth + 1)
        self.sandbox = state.sandbox_factory()
        self.history = History(
            state.history_settings, state.history_settings.context_window or state.models.window(self.lm)
        )
        self.iteration = 0
        self.mirrored = 0  # messages already copied into the REPL's `history`
        self.logged = 0  # messages already written to the trace
        self.sandbox_alive = False
        self.starting: asyncio.Future[None] | None = None  # the REPL's start, until code first needs it
        self.children = asyncio.Semaphore(state.limits.max_concurrent_children)
        self.subcalls = SubCalls(self)

    @property
    def is_child(self) -> bool:
        """A child RLM (started by a parent's code cell) rather than the run's root."""
        return self.parent_id is not None

    def emit(self, event: E) -> E:
        return self.state.emitter.emit(event)

    def here(self) -> Here:
        """The `parent_id` and `depth` of a record this RLM writes about itself."""
        return {"parent_id": self.id, "depth": self.depth}

    # --- the loop -----------------------------------------------------------------------------------
    async def run(self) -> NodeResult:
        if self.is_child:
            self.emit(
                ChildStart(
                    id=self.id,
                    parent_id=self.parent_id,
                    depth=self.depth,
                    question=excerpt(self.question, self.state.excerpt_chars),
                    model=self.lm.name,
                    batch_id=self.batch_id,
                )
            )
        try:
            # The REPL starts (and loads the context) while the first model call is in flight.
            self.starting = asyncio.ensure_future(self.sandbox.start(self.payload))
            result = await self._turns()
        except SandboxError as exc:
            result = self._error(str(exc))
        except asyncio.CancelledError:
            result = NodeResult(None, "error", self.iteration, "cancelled")
            self._end(result)
            raise
        finally:
            self.sandbox_alive = False
            if self.starting is not None:
                if not self.starting.done():  # never needed (e.g. FINAL on the first turn): stop it;
                    self.starting.cancel()  # what it made so far goes with the sandbox and the pool
                await asyncio.wait([self.starting])
                if not self.starting.cancelled() and self.starting.exception() is not None:
                    message = f"REPL start: {self.starting.exception()}"
                    self.emit(Error(**self.here(), message=message, recoverable=True))
                self.starting = None
            await self.sandbox.close()
        self._end(result)
        return result

    def _end(self, result: NodeResult) -> None:
        if self.is_child:
            self.emit(
                ChildEnd(
                    parent_id=self.parent_id,
                    depth=self.depth,
                    child_id=self.id,
                    stopped_by=result.stopped_by,
                    iterations=result.iterations,
                    answer=excerpt(answer_text(result.answer), self.state.excerpt_chars)
                    if result.answer is not None
                    else None,
                    answer_source=result.answer_source,
                    error=result.error,
                )
            )

    async def _turns(self) -> NodeResult:
        limits = self.state.limits
        sub_window = self.state.models.window(self.sub_lm)
        system = prompts.system_prompt(
            depth=self.depth, limits=limits, sub_model=self.sub_lm.name, sub_window=sub_window
        )
        if self.output is not None:
            system = system.rstrip("\n") + "\n\n" + self.output.prompt()
        self.history.append({"role": "system", "content": system})
        await self._measured_meta()
        self.history.append({"role": "user", "content": f"{self.meta}\n\nQuestion: {self.question}"})
        for iteration in range(1, limits.max_iterations + 1):
            self.iteration = iteration
            if self.history.needs_compaction():
                await self._compact()
            try:
                reply = await self._call(
                    self.history.view(), purpose="root" if self.depth == 0 else "child_root"
                )
            except BudgetExhausted as exc:
                return await self._forced_final(exc.limit)
            except ModelError as exc:
                return self._error(f"model call failed: {exc}")
            self.history.append({"role": "assistant", "content": reply})
            done = await self._act(reply)
            if done is not None:
                stopped_by: StopReason = "final" if done.error is None else "error"
                return self._finish(
                    done.answer, stopped_by, done.error, parsed=done.parsed, source=done.source
                )
        return await self._forced_final("max_iterations")

    async def _call(
        self,
        messages: list[dict[str, Any]],
        *,
        purpose: Purpose,
        final: bool = False,
        extra: list[dict[str, Any]] | None = None,
    ) -> str:
        """A turn of this node's own model; the trace gets only the messages it has not seen yet."""
        new = self.history.messages[self.logged :] + (extra or [])
        response = await self.state.call_model(
            self.lm,
            [*messages, *(extra or [])],
            depth=self.depth,
            parent_id=self.id,
            purpose=purpose,
            final=final,
            log_messages=new,
            iteration=self.iteration,
        )
        self.logged = len(self.history.messages) + 1  # the reply is in this lm_call record
        return response.text

    async def _act(self, reply: str) -> Final | None:
        parsed = parse_reply(reply)
        parts: list[str] = []
        code_failed = rejected = False
        for index, code in enumerate(parsed.code_blocks, 1):
            result = await self._exec(code)
            parts.append(format_result(index, len(parsed.code_blocks), result))
            code_failed = code_failed or result.error is not None
            if result.final is not None:
                source: AnswerSource = "final_var" if result.final.get("kind") == "final_var" else "final"
                done = self._accept(decode_final(result.final), parts, source)
                if done is not None:
                    return done
                rejected = True
                break
        if parsed.final is not None and not rejected:
            if code_failed:
                parts.append(
                    f"Your {parsed.final.kind.upper()}(...) was not accepted because your code failed; fix it first."
                )
            else:
                answer, problem = await self._resolve(parsed.final)
                if problem is None:
                    done = self._accept(answer, parts, parsed.final.kind)
                    if done is not None:
                        return done
                else:
                    parts.append(problem)
        if not parsed.code_blocks and parsed.final is None:
            parts.append(prompts.NO_CODE)
        left = self.state.limits.max_llm_calls - self.state.ledger.total.calls - self.state.ledger.in_flight
        header = f"[turn {self.iteration} of {self.state.limits.max_iterations} done; model calls left in the run: {left}]"
        self.history.append({"role": "user", "content": header + "\n" + "\n\n".join(parts)})
        return None

    def _accept(self, answer: Any, parts: list[str], source: AnswerSource) -> Final | None:
        """A FINAL value, checked against the output schema; None (and feedback in `parts`) when rejected."""
        if self.output is None:
            return Final(answer, source=source)
        verdict = self.output.check(answer)
        if verdict.ok:
            return Final(verdict.value, verdict.parsed, source=source)
        self.rejections += 1
        self.emit(
            OutputRejected(
                **self.here(), iteration=self.iteration, attempt=self.rejections, errors=list(verdict.errors)
            )
        )
        if self.rejections > self.output.max_retries:
            error = self.output.failure(verdict, self.rejections, answer)
            return Final(answer, error=error, source=source)
        parts.append(self.output.feedback(verdict, self.output.max_retries - self.rejections + 1))
        return None

    async def _exec(self, code: str) -> ExecResult:
        append = self.history.messages[self.mirrored :]
        self.mirrored = len(self.history.messages)
        exec_id = self.state.emitter.new_id()
        self.emit(
            ExecStart(**self.here(), exec_id=exec_id, iteration=self.iteration, code=excerpt(code, 400))
        )

        async def rpc(method: str, params: dict[str, Any]) -> Any:
            return await self.subcalls.handle(method, params, exec_id)

        await self._ready()
        result = await self.sandbox.execute(code, rpc, append)
        self.emit(
            Exec(
                **self.here(),
                id=exec_id,
                iteration=self.iteration,
                code=excerpt(code, 20_000 if self.state.excerpt_chars else 0),
                output=excerpt(result.output, self.state.excerpt_chars),
                error=result.error,
                final=result.final is not None,
                restarted=result.restarted,
                timed_out=result.timed_out,
                duration_s=round(result.duration_s, 4),
                rpc_calls=result.rpc_calls,
            )
        )
        return result

    async def _measured_meta(self) -> None:
        """Files and pre-filtered contexts are measured by the worker that loads them (exact sizes, files
        left out, the filtered view): wait for it and use its figures in the first prompt."""
        if self.payload.kind != "files" and not self.payload.options.get("prefilter"):
            return
        await self._ready()
        stats = getattr(self.sandbox, "context_stats", None)
        if stats and self.check_loaded is not None:
            self.check_loaded(stats)  # EmptyContext: nothing usable once read, before any model call
        if stats:
            self.meta = render(stats, note=self.payload.options.get("note"))

    async def _ready(self) -> None:
        """Wait for the REPL started beside the first model call; a failed start raises SandboxError."""
        if self.starting is not None:
            starting, self.starting = self.starting, None
            await starting
            self.sandbox_alive = True

    async def _resolve(self, final: FinalLine) -> tuple[Any, str | None]:
        if final.kind == "final":
            return final.arg, None
        await self._ready()
        if not self.sandbox_alive:
            return None, "FINAL_VAR cannot be read: the REPL is not running"
        reply = await self.sandbox.get_var(final.arg)
        if not reply.get("ok"):
            return None, f"FINAL_VAR({final.arg}) failed: {reply.get('error')}. Assign the variable first."
        return decode_final(reply), None

    async def _compact(self) -> None:
        old = self.history.turns_to_condense()
        digest = "\n\n".join(f"[{m['role']}]\n{str(m['content'])[:4000]}" for m in old)
        ask = prompts.compaction_request(self.question, self.history.summary, digest)
        summary: str | None = None
        try:
            summary = (
                await self.state.call_model(
                    self.lm,
                    ask,
                    depth=self.depth,
                    parent_id=self.id,
                    purpose="compaction",
                    iteration=self.iteration,
                )
            ).text
        except (BudgetExhausted, ModelError) as exc:
            self.emit(Error(**self.here(), message=f"compaction summary skipped: {exc}", recoverable=True))
        self.history.compact(summary)
        self.emit(
            Compaction(
                **self.here(),
                iteration=self.iteration,
                condensed_upto=self.history.compacted_upto,
                view_tokens=self.history.view_tokens(),
            )
        )

    async def _forced_final(self, reason: LimitReason) -> NodeResult:
        """A limit stopped the loop: one call asking for an answer from what is known. Its answer is the
        reply's FINAL value or, without one, its prose with code removed; never code, never made up."""
        self.emit(Limit(**self.here(), reason=reason, iteration=self.iteration))
        ask = {"role": "user", "content": prompts.FORCED_FINAL.format(reason=reason)}
        try:
            reply = await self._call(self.history.view(), purpose="final", final=self.depth == 0, extra=[ask])
        except BudgetExhausted as exc:
            why = "no time" if exc.limit == "timeout" else "no model call or budget"
            return self._finish(None, reason, f"stopped by {reason}; {why} left for a final answer ({exc})")
        except ModelError as exc:
            return self._finish(None, reason, f"stopped by {reason}; the final answer's call failed: {exc}")
        self.history.append(ask)
        self.history.append({"role": "assistant", "content": reply})
        answer, source, problem = await self._forced_answer(reply)
        if answer is None:
            return self._finish(None, reason, f"stopped by {reason}; {problem}")
        if self.output is not None:  # no corrections left at a limit: the answer matches or it is reported
            verdict = self.output.check(answer)
            if not verdict.ok:
                error = self.output.failure(verdict, self.rejections + 1, answer)
                return self._finish(answer, reason, error, source=source)
            return self._finish(verdict.value, reason, parsed=verdict.parsed, source=source)
        return self._finish(answer, reason, source=source)

    async def _forced_answer(self, reply: str) -> tuple[Any, AnswerSource, str]:
        """(answer, its source, why there is none) of a forced final reply."""
        parsed = parse_reply(reply)
        problem = "the model's final reply held no answer"
        if parsed.final is not None:
            answer, resolve_problem = await self._resolve(parsed.final)
            if resolve_problem is None:
                return answer, parsed.final.kind, ""
            problem = resolve_problem
        text = prose_of(reply)
        if text:
            return text, "prose", ""
        return None, "none", problem

    async def answer_after_timeout(self) -> NodeResult:
        """The run's time is up and its REPL is gone: one bounded call for an answer from the history."""
        return await self._forced_final("timeout")

    def _finish(
        self,
        answer: Any,
        stopped_by: StopReason,
        error: str | None = None,
        *,
        parsed: Any = None,
        source: AnswerSource = "none",
    ) -> NodeResult:
        source = source if answer is not None else "none"
        self.emit(
            FinalRecord(
                **self.here(),
                stopped_by=stopped_by,
                iteration=self.iteration,
                answer=excerpt(answer_text(answer), self.state.excerpt_chars) if answer is not None else None,
                answer_source=source,
                error=error,
            )
        )
        return NodeResult(answer, stopped_by, self.iteration, error, parsed, source)

    def _error(self, message: str) -> NodeResult:
        self.emit(Error(**self.here(), message=message, iteration=self.iteration))
        return NodeResult(None, "error", self.iteration, message)

    def spawn_child(
        self, question: str, payload: ContextPayload, meta: str, parent_id: str, batch_id: str | None
    ) -> Node:
        """A child RLM one level down, with its own REPL (started by its `run`)."""
        return Node(
            self.state,
            depth=self.depth + 1,
            question=question,
            payload=payload,
            meta=meta,
            parent_id=parent_id,
            batch_id=batch_id,
        )


def decode_final(final: dict[str, Any]) -> Any:
    return final["json"] if "json" in final else final.get("text", "")


def format_result(index: int, total: int, result: ExecResult) -> str:
    label = f"Output of code block {index}/{total}" if total > 1 else "Output"
    body = result.output.rstrip() or ("(no output)" if result.error is None else "")
    if result.error:
        body = (body + "\n" if body else "") + result.error
    return f"{label}:\n{body}"
