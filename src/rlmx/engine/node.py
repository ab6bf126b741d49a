"""One RLM at one depth: its own REPL and turns; children are nodes one level down."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypedDict, TypeVar

from rlmx.answer import Answer, from_wire
from rlmx.context.metadata import render
from rlmx.context.payload import ContextPayload
from rlmx.engine.compaction import compact
from rlmx.engine.finals import forced_answer
from rlmx.engine.history import History
from rlmx.engine.parse import parse_reply
from rlmx.engine.repl_handle import ReplHandle
from rlmx.engine.result import NodeResult
from rlmx.engine.run_state import RunState
from rlmx.engine.subcalls import SubCalls, with_notes
from rlmx.errors import BudgetExhausted, ModelError, RLMError, SandboxError
from rlmx.lm.base import BaseLM
from rlmx.outcomes import LimitReason, Purpose, StopReason
from rlmx.sandbox.base import ExecResult
from rlmx.sandbox.frames import ReplOptions
from rlmx.trace.events import (
    ChildEnd,
    ChildStart,
    Error,
    Event,
    Exec,
    ExecStart,
    Limit,
    OutputRejected,
    SandboxReady,
    excerpt,
)
from rlmx.trace.events import Final as FinalRecord
from rlmx.typed import OutputSpec

E = TypeVar("E", bound=Event)


class Here(TypedDict):
    parent_id: str | None
    depth: int


class Node:
    def __init__(
        self,
        state: RunState,
        *,
        depth: int,
        question: str | None,
        payload: ContextPayload,
        meta: str,
        parent_id: str | None,
        node_id: str | None = None,
        output: OutputSpec | None = None,
        batch_id: str | None = None,
        check_loaded: Callable[[dict[str, Any]], None] | None = None,
        lm: BaseLM | None = None,
        repl: ReplHandle | None = None,
        note: str = "",
        turn_note: str = "",
    ) -> None:
        self.state = state
        self.check_loaded = check_loaded  # root only: refuses a context found empty once the worker read it
        self.batch_id = batch_id  # the batch (rlm_query_batched) this child belongs to
        self.output = output  # the typed-answer schema (root only)
        self.rejections = 0
        self.correcting = False  # the next turn answers the output schema's feedback
        self.depth = depth
        self.question = question
        self.payload = payload
        self.meta = meta
        self.parent_id = parent_id
        self.id = node_id or state.emitter.new_id()
        self.lm = lm or state.models.for_depth(depth)  # a child's model may be named by rlm_query(model=)
        self.sub_lm = state.models.for_depth(depth + 1)
        self.repl = repl or ReplHandle(state.sandbox_factory())  # a session's root keeps the session's
        self.note = note  # lines the opening adds after the context's description (a session's)
        self.turn_note = turn_note  # lines each turn's message ends with (a strict official session's)
        self.setup_code: str | None = None  # run in the REPL before the first turn (its output unseen)
        self.history = History(
            state.history_settings,
            state.history_settings.context_window or state.models.window(self.lm),
            segments=state.profile.dialect.summary_replaces_turns,
        )
        self.iteration = 0
        self.failing_turns = 0  # turns in a row whose code raised (Limits.max_errors)
        self.subcalls = SubCalls(
            state,
            depth=depth,
            sub_lm=self.sub_lm,
            payload=payload,
            meta=meta,
            spawn=self.run_child,
            children=asyncio.Semaphore(state.limits.max_concurrent_children),
        )

    @property
    def is_child(self) -> bool:
        """A child RLM (started by a parent's code cell) rather than the run's root."""
        return self.parent_id is not None

    def repl_options(self) -> ReplOptions:
        """What this RLM's REPL is started with: the dialect's REPL side, the tools of its depth, and
        whether it is a session's (which later gets the session's values put into it)."""
        return ReplOptions(
            dialect=self.state.profile.dialect.repl,
            session=self.repl.keep,
            **self.state.tools.repl_options(self.depth),
        )

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
                    question=excerpt(self.question or "", self.state.excerpt_chars),
                    model=self.lm.name,
                    batch_id=self.batch_id,
                )
            )
        try:
            # The REPL starts (and loads the context) while the first model call is in flight.
            self.repl.start(self.payload, self.repl_options())
            result = await self._turns()
        except SandboxError as exc:
            result = self._error(str(exc))
        except asyncio.CancelledError:
            result = NodeResult(Answer.none(), "error", self.iteration, "cancelled")
            self._end(result)
            raise
        finally:
            problem = await self.repl.close()
            if problem is not None:
                self.emit(Error(**self.here(), message=problem, recoverable=True))
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
                    answer=excerpt(result.answer.text(), self.state.excerpt_chars)
                    if result.answer.given
                    else None,
                    answer_source=result.answer.source,
                    error=result.error,
                )
            )

    def first_messages(self) -> list[dict[str, Any]]:
        """This RLM's first request: the system prompt and the opening (with a session's note)."""
        asked = self.question if self.state.profile.dialect.child_has_question or not self.is_child else None
        return self.state.first_messages(self.depth, self.sub_lm, self.meta + self.note, asked, self.output)

    async def _turns(self) -> NodeResult:
        limits, profile = self.state.limits, self.state.profile
        dialect, ledger = profile.dialect, self.state.ledger
        await self._measured_meta()
        if self.setup_code:
            await self._exec(self.setup_code)
        for message in [*self.first_messages(), *([] if self.is_child else dialect.prologue())]:
            self.history.append(message)
        for iteration in range(1, limits.max_iterations + 1):
            self.iteration = iteration
            if stop := dialect.stop_before_turn(ledger):
                return await self._forced_final(stop)
            if self.history.needs_compaction(whole=dialect.summary_replaces_turns):
                await compact(
                    self.state,
                    self.history,
                    lm=self.lm,
                    question=self.question or "(none: the task is in the context)",
                    node_id=self.id,
                    depth=self.depth,
                    iteration=self.iteration,
                )
            turn = profile.turn_prompt(iteration, limits.max_iterations)
            if turn is not None:
                self.history.append({"role": "user", "content": turn + self.turn_note})
            purpose: Purpose = "root" if self.depth == 0 else "child_root"
            if self.correcting:  # the last answer failed the output schema: this turn corrects it
                purpose, self.correcting = "correction", False
            try:
                reply = await self._call(self.history.for_model(), purpose=purpose)
            except BudgetExhausted as exc:
                return await self._forced_final(exc.limit)
            except ModelError as exc:
                return self._error(f"model call failed: {exc}")
            self.history.append({"role": "assistant", "content": reply})
            turn_start = len(self.history.messages) - 1
            done = await self._act(reply)
            if done is None:  # the official `history`'s segment: this turn's reply and output
                self.history.add_entry(self.history.messages[turn_start:])
            if stop := dialect.stop_after_turn(ledger, self.failing_turns):
                return await self._forced_final(stop)
            if done is not None:
                return self._finish(done, "final" if done.error is None else "error")
            if limits.max_errors is not None and self.failing_turns >= limits.max_errors:
                return await self._forced_final("max_errors")
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
        new = self.history.unlogged() + (extra or [])
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
        self.history.mark_logged(reply=True)  # the reply is in this lm_call record
        return response.text

    async def _act(self, reply: str) -> Answer | None:
        """Run the reply's code, in order; an accepted answer (FINAL, FINAL_VAR, the `answer` dict, or a
        FINAL line in the reply's prose) ends the loop, and blocks after it do not run (they do under a
        dialect that `runs_every_block`; the first answer counts). Otherwise the outputs go back to the
        model as the next user message."""
        profile = self.state.profile
        parsed = parse_reply(reply, profile.runnable, finals=profile.dialect.honours_final_text)
        results: list[ExecResult] = []
        notes: list[str] = []
        code_failed = rejected = False
        taken: Answer | None = None  # an answer taken while the later blocks still run (strict official)
        for code in parsed.code_blocks:
            result = await self._exec(code)
            results.append(result)
            code_failed = code_failed or result.error is not None
            if taken is None and result.final is not None:
                answer = from_wire(result.final)
                if (
                    answer.source == "answer_dict"
                    and result.error is not None
                    and profile.dialect.rejects_answer_of_failed_block
                ):
                    notes.append(
                        "Your answer was not accepted because the block that set it raised; fix it first."
                    )
                    rejected = True
                    break
                done = self._accept(answer, notes)
                if done is not None and not profile.dialect.runs_every_block:
                    return done
                if done is not None:
                    taken = done
                    continue
                rejected = True
                break
        if taken is not None:
            self.failing_turns = self.failing_turns + 1 if code_failed else 0
            return taken
        if parsed.final is not None and not rejected:
            if code_failed:
                notes.append(
                    f"Your {parsed.final.source.upper()}(...) was not accepted because your code failed; fix it first."
                )
            else:
                answer, problem = await self._resolve(parsed.final)
                if problem is None:
                    done = self._accept(answer, notes)
                    if done is not None:
                        return done
                else:
                    notes.append(problem)
        if not parsed.code_blocks and parsed.final is None and profile.no_code():
            notes.append(profile.no_code())
        self.failing_turns = self.failing_turns + 1 if code_failed else 0
        feedback = profile.feedback(
            results,
            notes,
            iteration=self.iteration,
            max_iterations=self.state.limits.max_iterations,
            calls_left=self.state.ledger.calls_left(),
            skipped=parsed.skipped,
        )
        if feedback:  # the strict official dialect says nothing after a reply without code
            self.history.append({"role": "user", "content": feedback})
        return None

    def _accept(self, answer: Answer, parts: list[str]) -> Answer | None:
        """A FINAL value, checked against the output schema; None (and feedback in `parts`) when rejected."""
        if self.output is None:
            return answer
        checked = self.output.check(answer)
        if checked.problems is None:
            return checked
        self.rejections += 1
        self.emit(
            OutputRejected(
                **self.here(), iteration=self.iteration, attempt=self.rejections, errors=[checked.problems]
            )
        )
        if self.rejections > self.output.max_retries:
            return answer.refused(self.output.failure(checked, self.rejections))
        parts.append(self.output.feedback(checked, self.output.max_retries - self.rejections + 1))
        self.correcting = True
        return None

    async def _exec(self, code: str, *, sub_calls: bool = True) -> ExecResult:
        append = self.history.take_unmirrored()
        if not self.state.sandbox_layer:
            await self.repl.ready()
            isolation = self.repl.isolation
            self.state.sandbox_layer = str(isolation.get("layer") or "unknown")
            self.emit(SandboxReady(**self.here(), **isolation))
        exec_id = self.state.emitter.new_id()
        self.state.cells_run += 1
        self.emit(
            ExecStart(**self.here(), exec_id=exec_id, iteration=self.iteration, code=excerpt(code, 400))
        )

        async def rpc(method: str, params: dict[str, Any]) -> Any:
            if not sub_calls:
                raise RLMError(f"{method} is not available while answering at a limit")
            return await self.subcalls.handle(method, params, exec_id)

        try:
            result = await self.repl.execute(code, rpc, append)
        finally:
            notes = self.subcalls.take_notes(exec_id)  # the host's notes for this cell's output
        result.output = with_notes(result.output, notes)
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
        await self.repl.ready()
        stats = self.repl.context_stats
        if stats and self.check_loaded is not None:
            self.check_loaded(stats)  # EmptyContext: nothing usable once read, before any model call
        if stats:
            self.meta = render(stats, note=self.payload.options.get("note"))

    async def _resolve(self, final: Answer) -> tuple[Answer, str | None]:
        """A FINAL from a reply's prose with its value: FINAL_VAR's variable is read from the REPL."""
        if final.var is None:
            return final, None
        reply = await self.repl.get_var(final.var)
        if reply is None:
            return final, "FINAL_VAR cannot be read: the REPL is not running"
        if not reply.get("ok"):
            return final, f"FINAL_VAR({final.var}) failed: {reply.get('error')}. Assign the variable first."
        return from_wire({**reply, "kind": "final_var"}), None

    async def _forced_final(self, reason: LimitReason) -> NodeResult:
        """A limit stopped the loop: one call asking for an answer from what is known. Its answer is the
        reply's FINAL value or, without one, its prose with code removed; never code, never made up."""
        self.emit(Limit(**self.here(), reason=reason, iteration=self.iteration))
        dialect = self.state.profile.dialect
        if not dialect.asks_at(reason):  # the official runtime stops at once
            return self._finish(Answer.none(f"stopped by {reason}"), reason)
        ask = dialect.final_request(reason)
        try:
            reply = await self._call(
                self.history.for_model(), purpose="final", final=self.depth == 0, extra=[ask]
            )
        except BudgetExhausted as exc:
            why = "no time" if exc.limit == "timeout" else "no model call or budget"
            return self._finish(
                Answer.none(f"stopped by {reason}; {why} left for a final answer ({exc})"), reason
            )
        except ModelError as exc:
            return self._finish(
                Answer.none(f"stopped by {reason}; the final answer's call failed: {exc}"), reason
            )
        self.history.append(ask)
        self.history.append({"role": "assistant", "content": reply})
        answer = await forced_answer(self, reply)
        if not answer.given:
            return self._finish(Answer.none(f"stopped by {reason}; {answer.error}"), reason)
        if self.output is not None:  # no corrections left at a limit: the answer matches or it is reported
            checked = self.output.check(answer)
            if checked.problems is not None:
                answer = answer.refused(self.output.failure(checked, self.rejections + 1))
            else:
                answer = checked
        return self._finish(answer, reason)

    async def answer_after_timeout(self) -> NodeResult:
        """The run's time is up and its REPL is gone: one bounded call for an answer from the history."""
        return await self._forced_final("timeout")

    def _finish(self, answer: Answer, stopped_by: StopReason) -> NodeResult:
        """End this RLM with `answer` (its `error`, if any, is the RLM's error)."""
        self.emit(
            FinalRecord(
                **self.here(),
                stopped_by=stopped_by,
                iteration=self.iteration,
                answer=excerpt(answer.text(), self.state.excerpt_chars) if answer.given else None,
                answer_source=answer.source,
                error=answer.error,
            )
        )
        return NodeResult(answer, stopped_by, self.iteration, answer.error)

    def _error(self, message: str) -> NodeResult:
        self.emit(Error(**self.here(), message=message, iteration=self.iteration))
        return NodeResult(Answer.none(message), "error", self.iteration, message)

    async def run_child(
        self,
        question: str | None,
        payload: ContextPayload,
        meta: str,
        parent_id: str,
        batch_id: str | None,
        lm: BaseLM | None = None,
    ) -> NodeResult:
        """A child RLM one level down, with its own REPL, run to its end (`SubCalls`' `spawn`)."""
        child = Node(
            self.state,
            depth=self.depth + 1,
            question=question,
            payload=payload,
            meta=meta,
            parent_id=parent_id,
            batch_id=batch_id,
            lm=lm,
        )
        return await child.run()
