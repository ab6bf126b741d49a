"""`NodeResult`: how one RLM of the tree (the root or a child) ended."""

from __future__ import annotations

from dataclasses import dataclass

from rlmx.answer import Answer
from rlmx.outcomes import StopReason


@dataclass(frozen=True)
class NodeResult:
    answer: Answer  # Answer.none() when the RLM produced none
    stopped_by: StopReason
    iterations: int
    error: str | None = None
