"""`RunState`: what every RLM of one run's state shares — its models, the one ledger, the event stream
and the settings — and the one place where model calls are made and booked (`call_model`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from rlmx.engine.ledger import Ledger, SharedBudget
from rlmx.engine.profiles import PromptProfile
from rlmx.errors import BudgetExhausted, ConfigError, DeadlineExceeded, ModelError
from rlmx.images.parts import content_text, message_image_tokens
from rlmx.limits import HistorySettings, Limits
from rlmx.lm.base import (
    LM,
    BaseLM,
    CallSettings,
    LMResponse,
    Message,
    RetryNotice,
    Usage,
    context_window_for,
    estimate_message_tokens,
    estimate_tokens,
)
from rlmx.outcomes import Purpose
from rlmx.sandbox.base import Sandbox, SandboxSettings
from rlmx.tools import RunTools
from rlmx.trace.events import LMCall, LMRetry, excerpt
from rlmx.trace.writer import Emitter
from rlmx.typed import OutputSpec

Pricer = Callable[[str, Usage], "float | None"]

BUDGET_OUTPUT_TOKENS = 8_192  # output cap sent with every call when max_cost_usd is set without one
MIN_FINAL_OUTPUT_TOKENS = 256  # the forced final answer's output is fitted to the budget, down to this
FINAL_PROMPT_TOKENS = 300  # turn header and forced-final request, on top of the reply and output


@dataclass
class Models:
    """Which model serves which depth: `root` at depth 0, `sub` for sub-calls and child roots."""

    root: BaseLM
    sub: BaseLM
    by_depth: dict[int, BaseLM] = field(default_factory=dict)

    def for_depth(self, depth: int) -> BaseLM:
        return self.by_depth.get(depth) or (self.root if depth == 0 else self.sub)

    def find(self, name: str) -> BaseLM | None:
        """The run's model called `name` (`provider:model` or just `model`); None when it has none."""
        for lm in (self.root, self.sub, *self.by_depth.values()):
            if name in (lm.name, lm.name.split(":", 1)[-1]):
                return lm
        return None

    def window(self, lm: LM) -> int:
        return context_window_for(lm.name)


@dataclass
class RunState:
    limits: Limits
    models: Models
    ledger: Ledger
    emitter: Emitter
    sandbox_factory: Callable[[], Sandbox]
    sandbox_settings: SandboxSettings = field(default_factory=SandboxSettings)
    history_settings: HistorySettings = field(default_factory=HistorySettings)
    pricer: Pricer | None = None
    excerpt_chars: int = 2_000
    profile: PromptProfile = field(default_factory=PromptProfile.of)
    tools: RunTools = field(default_factory=RunTools)  # the user's tools, by depth (rlmx.tools)
    shared: SharedBudget | None = None  # limits shared with other runs (a batch's), checked after the ledger
    sandbox_layer: str = ""  # where the run's model code ran (its SandboxReady's layer; "": no cell ran)
    # the context's image files (document name and absolute path -> path), the only host files a
    # sub-call's images may be read from (set by the root's SubCalls, used at every depth)
    image_files: dict[str, str] = field(default_factory=dict)
    cells_run: int = 0  # code cells executed, at every depth (0: no reply held a code block)

    def system_prompt(self, depth: int, sub_lm: BaseLM) -> str:
        """The system prompt of an RLM at `depth`: its profile's, naming the tools of its REPL."""
        return self.profile.system_prompt(
            depth=depth,
            limits=self.limits,
            sub_model=sub_lm.name,
            sub_window=self.models.window(sub_lm),
            tools=self.tools.prompt(depth),
        )

    def first_messages(
        self, depth: int, sub_lm: BaseLM, meta: str, question: str | None, output: OutputSpec | None = None
    ) -> list[Message]:
        """An RLM's first request: its system prompt (its tools; the output schema's section when it has
        one) and the opening with its context's description `meta` and its `question`."""
        system = self.system_prompt(depth, sub_lm)
        if output is not None:
            system = system.rstrip("\n") + "\n\n" + output.prompt()
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": self.profile.opening(meta, question)},
        ]

    def settings(
        self,
        *,
        final: bool = False,
        max_output_tokens: int | None = None,
        deadline: float | None = None,
        on_retry: RetryNotice | None = None,
    ) -> CallSettings:
        """A call's settings. Under `timeout_s` the call's deadline is the run's (the forced final
        answer's) or the end of the working time before the final answer's reserve; without one, the
        forced final answer is bounded by `final_answer_timeout_s`."""
        timeout = None
        if deadline is not None:
            timeout = max(0.001, deadline - time.monotonic())
        elif final:
            timeout = self.limits.final_answer_timeout_s
            deadline = time.monotonic() + timeout
        return CallSettings(
            max_output_tokens=max_output_tokens or self.output_cap(),
            timeout_s=timeout,
            deadline=deadline,
            on_retry=on_retry,
        )

    @property
    def cost_bounded(self) -> bool:
        """A cost budget applies to the run: its own `max_cost_usd`, or a shared one (a batch's)."""
        return self.limits.max_cost_usd is not None or (self.shared is not None and self.shared.prices_calls)

    def output_cap(self) -> int | None:
        """The per-call output cap; under a cost budget there always is one, so estimates are bounds."""
        if self.limits.max_output_tokens is not None or not self.cost_bounded:
            return self.limits.max_output_tokens
        return BUDGET_OUTPUT_TOKENS

    def cost_of(self, lm: LM, usage: Usage) -> float | None:
        if usage.cost_usd is not None:
            return usage.cost_usd
        return self.pricer(lm.name, usage) if self.pricer else None

    def estimate_cost(self, lm: LM, input_tokens: int, output_tokens: int) -> float | None:
        """Worst-case USD of a call, for the budget; None without a budget or a price."""
        if not self.cost_bounded or self.pricer is None:
            return None
        return self.pricer(lm.name, Usage(input_tokens=input_tokens, output_tokens=output_tokens))

    def budget_call(
        self, lm: LM, est_input: int, *, purpose: Purpose, final: bool
    ) -> tuple[float | None, int | None]:
        """(worst-case cost, output cap) of the call about to be made. A root turn also updates the
        reserve kept for the forced final answer (this input plus a reply, its output and the request);
        the forced final answer's output cap is fitted to what is left of the budget."""
        cap = self.output_cap()
        est = self.estimate_cost(lm, est_input, cap or 0)
        if est is None:
            return None, cap
        if purpose == "root":
            margin = (cap or 0) + estimate_tokens(self.sandbox_settings.output_chars) + FINAL_PROMPT_TOKENS
            self.ledger.reserve_for_final(self.estimate_cost(lm, est_input + margin, cap or 0) or 0.0)
        if final and cap:
            input_cost = self.estimate_cost(lm, est_input, 0) or 0.0
            fitted = self.ledger.final_output_cap(est, input_cost, cap, floor=MIN_FINAL_OUTPUT_TOKENS)
            if fitted != cap:
                cap, est = fitted, self.estimate_cost(lm, est_input, fitted)
        return est, cap

    async def call_model(
        self,
        lm: LM,
        messages: list[Message],
        *,
        depth: int,
        parent_id: str | None,
        purpose: Purpose,
        final: bool = False,
        log_messages: list[Message] | None = None,
        iteration: int | None = None,
        batch_id: str | None = None,
    ) -> LMResponse:
        """Admit the call (the ledger, then a shared budget), invoke the model, book and trace what
        happened, whether it answered or failed. The only way a model is called."""
        call = ModelCall(lm, messages, depth, parent_id, purpose, final, log_messages, iteration, batch_id)
        admission = await self._admit(call)
        outcome = CallOutcome()
        started = time.monotonic()
        try:
            return await self._invoke(call, admission, outcome)
        finally:
            self._book(call, admission, outcome, started)

    async def _admit(self, call: ModelCall) -> Admission:
        """The call's estimates, checked and reserved against the ledger and then a shared budget; raises
        BudgetExhausted (nothing left reserved) when either refuses it."""
        est_input = estimate_message_tokens(call.messages) + message_image_tokens(
            call.messages, call.lm.name, call.lm
        )
        est_cost, output_cap = self.budget_call(call.lm, est_input, purpose=call.purpose, final=call.final)
        deadline = self.ledger.deadline if call.final else self.ledger.work_deadline
        if call.final and deadline is not None and deadline <= time.monotonic():
            raise BudgetExhausted("timeout", "no time left for a final answer")
        reserved = self.ledger.acquire(final=call.final, est_input_tokens=est_input, est_cost_usd=est_cost)
        grant = None
        if self.shared is not None:
            try:
                grant = await self.shared.reserve(
                    est_tokens=est_input,
                    est_cost_usd=est_cost,
                    final=call.final,
                    final_reserve_usd=self.ledger.final_reserve_usd,
                )
            except BaseException:
                self.ledger.release(reserved)
                raise
        return Admission(est_cost, output_cap, deadline, reserved, grant)

    async def _invoke(self, call: ModelCall, admission: Admission, outcome: CallOutcome) -> LMResponse:
        """The model's reply, written into `outcome`; a failure is written there too and raised as the
        engine's error (the run's deadline as BudgetExhausted, a broken LM as ModelError)."""
        lm = call.lm

        def on_retry(attempt: int, error: str, delay: float) -> None:
            self.emitter.emit(
                LMRetry(
                    parent_id=call.parent_id,
                    depth=call.depth,
                    model=lm.name,
                    purpose=call.purpose,
                    attempt=attempt,
                    error=error,
                    delay_s=round(delay, 3),
                )
            )

        settings = self.settings(
            final=call.final,
            max_output_tokens=admission.output_cap,
            deadline=admission.deadline,
            on_retry=on_retry,
        )
        settings = replace(settings, purpose=call.purpose, depth=call.depth, iteration=call.iteration)
        try:
            outcome.response = await within(lm, lm.complete(call.messages, settings), settings.deadline)
        except DeadlineExceeded as exc:
            outcome.failed(str(exc), exc)
            raise BudgetExhausted("timeout", f"timeout_s={self.limits.timeout_s} reached: {exc}") from exc
        except ModelError as exc:
            outcome.failed(str(exc), exc)
            raise
        except asyncio.CancelledError:
            outcome.failed("cancelled")
            raise
        except Exception as exc:  # an LM implementation that broke its contract: loud, but booked
            outcome.failed(f"{type(exc).__name__}: {exc}")
            raise ModelError(f"model {lm.name} failed: {outcome.error}") from exc
        return outcome.response

    def _book(self, call: ModelCall, admission: Admission, outcome: CallOutcome, started: float) -> None:
        """The call charged to the ledger (a cached reply only releases its reservation) and settled with
        a shared budget, then traced as an `lm_call` record."""
        lm, response = call.lm, outcome.response
        usage = response.usage if response else Usage()
        cost = None
        counted = response is None or not response.cached
        if counted:
            cost = self.cost_of(lm, usage)  # a failed call: 0.0 when priced, unknown when not
            self.ledger.record(lm.name, call.depth, usage, cost, admission.reserved)
        else:
            self.ledger.release(admission.reserved)
        if self.shared is not None:
            tokens = usage.input_tokens + usage.output_tokens
            self.shared.settle(admission.grant, tokens=tokens, cost_usd=cost, made=counted)
        messages = call.messages
        self.emitter.emit(
            LMCall(
                parent_id=call.parent_id,
                depth=call.depth,
                model=lm.name,
                purpose=call.purpose,
                iteration=call.iteration,
                batch_id=call.batch_id,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cached_tokens=usage.cached_tokens,
                reasoning_tokens=usage.reasoning_tokens,
                cost_usd=cost,
                cost_source=cost_source(usage, cost, response is not None),
                est_cost_usd=admission.est_cost,
                max_output_tokens=admission.output_cap,
                counted=counted,
                cache_hit=bool(response and response.cached),
                duration_s=round(time.monotonic() - started, 4),
                attempts=response.attempts if response else outcome.attempts,
                attempt_errors=list(response.attempt_errors) if response else outcome.attempt_errors,
                n_messages=len(messages),
                input_chars=sum(len(content_text(m.get("content", ""))) for m in messages),
                messages=[
                    {"role": m.get("role"), **excerpt(content_text(m.get("content", "")), self.excerpt_chars)}
                    for m in (messages if call.log_messages is None else call.log_messages)
                ],
                reply=excerpt(response.text, self.excerpt_chars) if response else None,
                error=outcome.error,
                finish_reason=response.finish_reason if response else None,
            )
        )


@dataclass(frozen=True)
class ModelCall:
    """One call `RunState.call_model` is asked to make: the model, the messages, where in the state it is
    made and what for (`log_messages`: what the trace shows instead of `messages`, when given)."""

    lm: LM
    messages: list[Message]
    depth: int
    parent_id: str | None
    purpose: Purpose
    final: bool
    log_messages: list[Message] | None
    iteration: int | None
    batch_id: str | None


@dataclass(frozen=True)
class Admission:
    """A call let through: its worst-case cost and output cap, its deadline, and what the ledger (and a
    shared budget, `grant`) reserved for it until it is booked."""

    est_cost: float | None
    output_cap: int | None
    deadline: float | None
    reserved: float
    grant: Any


@dataclass
class CallOutcome:
    """What came of an admitted call: the response, or the error with the attempts made."""

    response: LMResponse | None = None
    error: str | None = None
    attempts: int = 1
    attempt_errors: list[str] = field(default_factory=list)

    def failed(self, error: str, exc: ModelError | None = None) -> None:
        self.error = error
        if exc is not None:
            self.attempts, self.attempt_errors = exc.attempts, list(exc.attempt_errors)


DEADLINE_GRACE_S = 0.05  # an LM that bounds its own calls gets to say so first, with its own message


async def within(lm: LM, call: Awaitable[LMResponse], deadline: float | None) -> LMResponse:
    """`call`, abandoned at `deadline` even when the LM ignores `CallSettings.deadline` (a caller's own
    LM class, a thread that cannot be interrupted): the run never waits past its deadline for a model."""
    if deadline is None:
        return await call
    try:
        return await asyncio.wait_for(call, max(0.0, deadline - time.monotonic()) + DEADLINE_GRACE_S)
    except asyncio.TimeoutError:
        raise DeadlineExceeded(f"{lm.name}: no reply before the run's deadline") from None


def cost_source(usage: Usage, cost: float | None, made: bool) -> str | None:
    """Where an lm_call's cost came from: the provider's report, a price, or nowhere (None)."""
    if cost is None:
        return None
    if usage.cost_usd is not None:
        return "provider"
    return "price" if made else "none"


def check_budget_for_first_call(state: RunState, first: list[Message]) -> None:
    """Refuse at start (ConfigError) a `max_cost_usd` that cannot pay for the first root turn's
    worst-case estimate plus the final answer kept in reserve: such a run could only stop at once.
    `first`: the root's first request, as it will be sent (`Node.first_messages`)."""
    budget = state.limits.max_cost_usd
    if budget is None or state.pricer is None:
        return
    lm = state.models.root
    est_input = estimate_message_tokens(first)
    cap = state.output_cap() or 0
    turn = state.estimate_cost(lm, est_input, cap)
    margin = cap + estimate_tokens(state.sandbox_settings.output_chars) + FINAL_PROMPT_TOKENS
    reserve = state.estimate_cost(lm, est_input + margin, cap)
    if turn is None or reserve is None or turn + reserve <= budget:
        return
    need = turn + reserve
    raise ConfigError(
        f"`max_cost_usd`={budget:g} cannot pay for the first model call: its worst case is ${turn:.4f} "
        f"({est_input:,} input tokens + {cap:,} output tokens, the per-call output cap, at {lm.name}'s "
        f"price) plus ${reserve:.4f} kept for the final answer; the smallest budget that can run is "
        f"${_round_up(need):g}. Raise `max_cost_usd`, or lower the estimate with `max_output_tokens` "
        f"(now {cap:,})"
    )


def _round_up(usd: float) -> float:
    """`usd` rounded up to two significant digits (0.01987 -> 0.02), so the suggestion is enough."""
    import math

    if usd <= 0:
        return 0.0
    step = 10 ** (math.floor(math.log10(usd)) - 1)
    return round(math.ceil(usd / step - 1e-9) * step, 12)
