"""What a whole run tree shares: models, the one ledger, the event stream, settings; and the one
place where model calls are made and booked."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlmx.engine.events import Emitter, excerpt
from rlmx.engine.ledger import Ledger
from rlmx.errors import ModelError, RLMError
from rlmx.limits import HistorySettings, Limits
from rlmx.lm.base import (
    LM,
    CallSettings,
    LMResponse,
    Message,
    Usage,
    context_window_for,
    estimate_message_tokens,
)
from rlmx.sandbox.base import Sandbox, SandboxSettings

Pricer = Callable[[str, Usage], "float | None"]


@dataclass
class Models:
    """Which model serves which depth: `root` at depth 0, `sub` for sub-calls and child roots."""

    root: LM
    sub: LM
    by_depth: dict[int, LM] = field(default_factory=dict)
    windows: dict[str, int] = field(default_factory=dict)

    def for_depth(self, depth: int) -> LM:
        return self.by_depth.get(depth) or (self.root if depth == 0 else self.sub)

    def named(self, name: str) -> LM:
        for lm in (self.root, self.sub, *self.by_depth.values()):
            if name in (lm.name, lm.name.split(":", 1)[-1]):
                return lm
        known = sorted({lm.name for lm in (self.root, self.sub, *self.by_depth.values())})
        raise RLMError(f"unknown model {name!r} for llm_query; this run has: {', '.join(known)}")

    def window(self, lm: LM) -> int:
        return self.windows.get(lm.name) or context_window_for(lm.name)


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

    def settings(self, *, final: bool = False) -> CallSettings:
        timeout = self.limits.final_answer_timeout_s if final else None
        return CallSettings(max_output_tokens=self.limits.max_output_tokens, timeout_s=timeout)

    def cost_of(self, lm: LM, usage: Usage) -> float | None:
        if usage.cost_usd is not None:
            return usage.cost_usd
        return self.pricer(lm.name, usage) if self.pricer else None

    async def call_model(
        self,
        lm: LM,
        messages: list[Message],
        *,
        depth: int,
        parent_id: str | None,
        purpose: str,
        final: bool = False,
        log_messages: list[Message] | None = None,
        **fields: Any,
    ) -> LMResponse:
        """Check the ledger, make the call, book it, and trace it. The only way a model is called."""
        self.ledger.acquire(final=final, est_input_tokens=estimate_message_tokens(messages))
        started = time.monotonic()
        response: LMResponse | None = None
        error: str | None = None
        attempts = 1
        booked = False
        try:
            response = await lm.complete(messages, self.settings(final=final))
        except ModelError as exc:
            error, attempts = str(exc), exc.attempts
            raise
        except asyncio.CancelledError:
            error = "cancelled"
            raise
        except Exception as exc:  # an LM implementation that broke its contract: loud, but booked
            error = f"{type(exc).__name__}: {exc}"
            raise ModelError(f"model {lm.name} failed: {error}") from exc
        finally:
            usage = response.usage if response else Usage()
            cost = None
            if response is not None and response.cached:
                self.ledger.release()
            else:
                cost = self.cost_of(lm, usage) if response else 0.0
                self.ledger.record(lm.name, depth, usage, cost)
                booked = True
            self.emitter.emit(
                "lm_call",
                parent_id=parent_id,
                depth=depth,
                model=lm.name,
                purpose=purpose,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cached_tokens=usage.cached_tokens,
                reasoning_tokens=usage.reasoning_tokens,
                cost_usd=cost,
                counted=booked,
                cache_hit=bool(response and response.cached),
                duration_s=round(time.monotonic() - started, 4),
                attempts=response.attempts if response else attempts,
                attempt_errors=list(response.attempt_errors) if response else [],
                n_messages=len(messages),
                input_chars=sum(len(str(m.get("content", ""))) for m in messages),
                messages=[
                    {"role": m.get("role"), **excerpt(str(m.get("content", "")), self.excerpt_chars)}
                    for m in (messages if log_messages is None else log_messages)
                ],
                reply=excerpt(response.text, self.excerpt_chars) if response else None,
                error=error,
                **fields,
            )
        return response
