"""What the scripted server answers with and records: a policy's `Reply`, an injected `Fault`, the
`ScriptedRequest` log entry, and `random_faults`, a deterministic fault schedule.

rlmx tells a loopback model endpoint what each call is for, in three headers that a remote provider
never sees: `x-rlmx-purpose` (a `rlmx.outcomes.Purpose`: "root", "child_root", "llm_query",
"fallback", "compaction", "final" for the forced final answer after a limit, "correction" for a root
turn after a rejected typed answer), `x-rlmx-depth` (0 for the root RLM; a sub-call is one level below
the RLM whose code made it) and `x-rlmx-iteration` (the turn of that RLM, from 1; absent on sub-calls).
`ScriptedRequest` reads them into `purpose`, `depth` and `iteration`; each is None when the header is
absent (a request from some other client) or unreadable.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CALL_HEADERS",
    "FAULT_KINDS",
    "Fault",
    "FaultFn",
    "Latency",
    "Policy",
    "Reply",
    "ScriptedRequest",
    "call_fields",
    "random_faults",
]

CALL_HEADERS = ("x-rlmx-purpose", "x-rlmx-depth", "x-rlmx-iteration")
FAULT_KINDS = ("stall", "invalid_json", "empty_choices", "empty_content", "disconnect", "trickle")


@dataclass
class Reply:
    """A policy's answer. Token counts left as None are estimated (about 4 characters a token)."""

    text: str
    input_tokens: int | None = None  # prompt tokens, cached ones included (OpenAI convention)
    output_tokens: int | None = None
    cached_tokens: int = 0
    cost: float | None = None  # reported as usage.cost (OpenRouter style) when not None
    finish_reason: str = "stop"
    # the reply's `usage` object exactly as sent, for a provider that reports usage its own way (DeepSeek's
    # prompt_cache_hit_tokens, ...); None: built from the counts above. Its prompt_tokens and
    # completion_tokens, when present, are what the server counts as served
    usage: dict[str, Any] | None = None


@dataclass(frozen=True)
class Fault:
    """A fault to inject into one request; build with the classmethods."""

    kind: str  # "status" or one of FAULT_KINDS
    code: int = 200
    retry_after: float | None = None
    message: str = ""
    seconds: float = 0.0
    body: Any = field(default=None, compare=False)  # an error body sent as is (JSON), for "status"

    @classmethod
    def status(
        cls, code: int, retry_after: float | None = None, message: str | None = None, body: Any = None
    ) -> Fault:
        """An HTTP error with an OpenAI-style error body (and a Retry-After header when given); `body`
        (any JSON value) replaces that body, for a provider whose errors look different (Gemini's are a
        JSON array of error objects)."""
        message = message or f"scripted fault: HTTP {code}"
        return cls("status", code=code, retry_after=retry_after, message=message, body=body)

    @classmethod
    def stall(cls, seconds: float) -> Fault:
        """Sleep `seconds` (on top of the latency), then reply normally."""
        return cls("stall", seconds=seconds)

    @classmethod
    def trickle(cls, interval_s: float = 0.5) -> Fault:
        """HTTP 200 headers, then one byte of a body every `interval_s`, never finishing (until the
        client leaves or the server stops): a read timeout never fires, only a deadline ends it."""
        return cls("trickle", seconds=interval_s)

    @classmethod
    def invalid_json(cls) -> Fault:
        """HTTP 200 with a body that is not JSON."""
        return cls("invalid_json")

    @classmethod
    def empty_choices(cls) -> Fault:
        """HTTP 200 with `choices: []` (Anthropic: `content: []`)."""
        return cls("empty_choices")

    @classmethod
    def empty_content(cls) -> Fault:
        """HTTP 200 with one choice whose content is the empty string."""
        return cls("empty_content")

    @classmethod
    def disconnect(cls) -> Fault:
        """Close the connection without sending any response."""
        return cls("disconnect")

    @property
    def label(self) -> str:
        """What the request log records: the status code as a string ("429"), else the kind."""
        return str(self.code) if self.kind == "status" else self.kind


@dataclass
class ScriptedRequest:
    """One request the server received, and what it did with it."""

    index: int
    path: str
    body: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)  # {"role", "content": str}
    model: str = ""
    headers: dict[str, str] = field(default_factory=dict)  # header names lower-cased
    t_received: float = 0.0  # time.monotonic()
    t_replied: float | None = None
    status: int | None = None  # None: no response sent (disconnect fault, or still running)
    fault: str | None = None  # Fault.label of the injected fault
    reply_text: str | None = None
    error: str | None = None  # server-side error: policy exception, bad request, auth
    api: str = "openai"  # "openai" | "anthropic"
    # what the call is for, from the x-rlmx-* headers rlmx sends to loopback endpoints (None: not sent)
    purpose: str | None = None  # "root", "child_root", "llm_query", "fallback", "compaction", "final", ...
    depth: int | None = None  # 0: the root RLM; sub-calls are one level below the RLM that made them
    iteration: int | None = None  # the RLM's turn, from 1; None on sub-calls


def call_fields(headers: dict[str, str]) -> dict[str, Any]:
    """`purpose`, `depth` and `iteration` of a request from its (lower-cased) x-rlmx-* headers."""
    purpose = headers.get("x-rlmx-purpose") or None
    return {
        "purpose": purpose.strip() if purpose else None,
        "depth": _int_or_none(headers.get("x-rlmx-depth")),
        "iteration": _int_or_none(headers.get("x-rlmx-iteration")),
    }


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


Policy = Callable[[list[dict[str, Any]], ScriptedRequest], "str | Reply"]
FaultFn = Callable[[ScriptedRequest], "Fault | None"]
Latency = float | Callable[[ScriptedRequest], float]


def random_faults(
    rate: float,
    *,
    seed: int = 0,
    kinds: Iterable[str] = ("429", "500", "stall", "invalid_json", "empty_choices"),
    stall_s: float = 2.0,
    retry_after: float | None = 0.05,
) -> FaultFn:
    """A fault function failing about `rate` of requests with a kind drawn from `kinds`.

    Deterministic: the decision for a request depends only on `seed` and `request.index`,
    so it does not depend on thread scheduling (and it is thread-safe). Kinds are status
    codes ("429", "503", ...) or names from FAULT_KINDS; 429 faults carry `retry_after`.
    """
    options = tuple(kinds)
    for kind in options:
        if not (kind.isdigit() or kind in FAULT_KINDS):
            raise ValueError(f"unknown fault kind {kind!r}; use a status code or one of {FAULT_KINDS}")
    if not options:
        raise ValueError("kinds must not be empty")

    def fault_for(request: ScriptedRequest) -> Fault | None:
        rng = random.Random(f"{seed}:{request.index}")
        if rng.random() >= rate:
            return None
        kind = rng.choice(options)
        if kind.isdigit():
            return Fault.status(int(kind), retry_after=retry_after if kind == "429" else None)
        if kind == "trickle":
            return Fault.trickle(stall_s / 4)
        return Fault.stall(stall_s) if kind == "stall" else Fault(kind)

    return fault_for
