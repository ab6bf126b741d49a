"""What every benchmark family shares: the item, sizes, seeded randomness, rendering and noise."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlmx.errors import ConfigError

Context = str | list[dict[str, str]]
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")
MIN_SIZE, MAX_SIZE = 1_024, 64 * 1_048_576


def parse_size(text: str | int) -> int:
    """'8k' -> 8,192 tokens, '1m' -> 1,048,576 (binary multiples, as RULER counts); a plain int is tokens."""
    if isinstance(text, int):
        value = text
    else:
        match = _SIZE.match(text)
        if not match:
            raise ConfigError(f"bad size {text!r}: write a token count like 8k, 128k, 1m or 10m")
        mult = {"": 1, "k": 1_024, "m": 1_048_576}[match.group(2).lower()]
        value = int(float(match.group(1)) * mult)
    if not MIN_SIZE <= value <= MAX_SIZE:
        raise ConfigError(f"size {text!r} is out of range: use 1k to 64m tokens")
    return value


def size_label(tokens: int) -> str:
    if tokens % 1_048_576 == 0:
        return f"{tokens // 1_048_576}M"
    if tokens % 1_024 == 0:
        return f"{tokens // 1_024}K"
    return str(tokens)


def estimate_tokens(chars: int) -> int:
    """The fast estimate used for every size in the suite: about 4 characters a token."""
    return (chars + 3) // 4


def rng_for(*parts: object) -> random.Random:
    """A random generator seeded from the parts (stable across runs and Python versions)."""
    return random.Random(":".join(str(p) for p in parts))


def unit_random(*parts: object) -> float:
    """A deterministic uniform number in [0, 1) for a key: how noise decides without shared state."""
    digest = hashlib.blake2b(":".join(str(p) for p in parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def render_documents(docs: list[dict[str, str]]) -> str:
    """Documents as one text, the way the REPL helpers show them: a `=== path ===` line, then the text."""
    return "\n".join(f"=== {d['path']} ===\n{d['text']}" for d in docs)


def render_context(context: Context) -> str:
    return context if isinstance(context, str) else render_documents(context)


def context_chars(context: Context) -> int:
    if isinstance(context, str):
        return len(context)
    return sum(len(d["path"]) + len(d["text"]) + 9 for d in context)


@dataclass
class EvalItem:
    """One benchmark task: a question over a context, with the gold answer known from the construction.

    `spec` says what is asked (question type and its parameters, JSON-able); `key` is what the oracle
    may know (e.g. the label of every instance, the gold documents) and is never written to results.
    """

    family: str
    variant: str
    id: str
    size_tokens: int
    question: str
    context: Context
    gold: Any
    spec: dict[str, Any] = field(default_factory=dict)
    key: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    @property
    def context_tokens(self) -> int:
        return estimate_tokens(context_chars(self.context))

    @property
    def question_line(self) -> str:
        """The first line of the question: how prompts and the oracle name the item."""
        return self.question.split("\n", 1)[0]


@dataclass(frozen=True)
class Score:
    value: float  # the family's primary score in [0, 1]
    metrics: dict[str, float] = field(default_factory=dict)  # secondary scores (strict, F1, recall, ...)


@dataclass(frozen=True)
class Noise:
    """How an oracle errs: each decision (a label, an answer) is wrong with probability `p`."""

    p: float = 0.0
    seed: int = 0

    def flips(self, *key: object) -> bool:
        return self.p > 0 and unit_random("noise", self.seed, *key) < self.p

    def pick(self, options: list[Any], *key: object) -> Any:
        return options[int(unit_random("pick", self.seed, *key) * len(options))]


class Family(Protocol):
    """A benchmark family: a seeded generator, its scorer, and the oracle's side of it."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str:
        """One line: what the family asks (shown by `rlmx eval --list`)."""
        ...

    @property
    def variants(self) -> tuple[str, ...]:
        """The variants of the family; the first is the default."""
        ...

    @property
    def sources(self) -> dict[str, str]:
        """Variant -> its text source and licence."""
        ...

    def built(self, variant: str) -> str:
        """The variant an item asked as `variant` is built from here: itself, or its fallback when its
        text source is not installed. Item ids and records name this one."""
        ...

    def generate(self, size_tokens: int, index: int, seed: int, variant: str) -> EvalItem: ...

    def score(self, answer: str, item: EvalItem) -> Score: ...

    def root_turns(self, item: EvalItem) -> list[str]:
        """The replies of a scripted root model that solves the item through the REPL with sub-calls."""
        ...

    def oracle_reply(self, prompt: str, item: EvalItem, noise: Noise) -> str:
        """A perfect reader's reply: answers from what is visible in the prompt, using the item's key."""
        ...

    def evidence(self, text: str, item: EvalItem) -> list[str]:
        """The pieces of `text` that matter for the item (what a perfect note-taker keeps)."""
        ...


Generator = Callable[[int, int, int, str], EvalItem]


def item_id(family: str, variant: str, size_tokens: int, seed: int, index: int) -> str:
    return f"{family}-{variant}-{size_label(size_tokens)}-s{seed}-{index:03d}"


# Scripted roots send sub-calls in groups: one llm_query_batched call may carry at most a few tens of
# megabytes of prompts, and a 10M-token context is more than that.
BATCHED = """
def batched(prompts, size=100):
    out = []
    for start in range(0, len(prompts), size):
        out += llm_query_batched(prompts[start:start + size])
    return out
"""


def repl(code: str, prose: str = "") -> str:
    """A scripted root reply: optional prose, then one ```repl block."""
    return f"{prose}\n```repl\n{code.strip()}\n```\n"
