"""`NodeResult`: how one RLM of the tree (the root or a child) ended; `RunResult`: how a run ended."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlmx.answer import Answer
from rlmx.outcomes import AnswerSource, StopReason


@dataclass(frozen=True)
class NodeResult:
    answer: Answer  # Answer.none() when the RLM produced none
    stopped_by: StopReason
    iterations: int
    error: str | None = None


@dataclass
class RunResult:
    answer: Any  # the FINAL value: a str, or a JSON value from FINAL_VAR; None when there is none
    # final | max_iterations | max_llm_calls | max_total_tokens | max_cost_usd | timeout | error | interrupted
    stopped_by: StopReason
    iterations: int  # root turns
    usage: dict[str, Any]
    trace_path: str | None
    elapsed_s: float
    error: str | None = None
    run_id: str = ""
    parsed: Any = None  # the typed answer (a pydantic object, or the JSON value) when `output` was given
    # where the answer came from: final (FINAL(...)), final_var (FINAL_VAR(name)), prose (a forced final
    # reply without FINAL, code removed), none (no answer: `answer` is None)
    answer_source: AnswerSource = "none"
    # where model code ran: namespaces | landlock | none (process-unisolated) | local; "": no cell ran
    sandbox: str = ""
    model: str = ""  # the root model, as rlmx resolved it (e.g. local:smollm2 when it fell back to it)
    cells: int = 0  # code cells executed in the run, at every depth; 0 when no reply held a code block

    @property
    def answered(self) -> bool:
        """An answer was produced and nothing failed: `final`, or a limit's forced final answer."""
        return self.answer_source != "none" and self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "answer_source": self.answer_source,
            "stopped_by": self.stopped_by,
            "iterations": self.iterations,
            "usage": self.usage,
            "trace_path": self.trace_path,
            "elapsed_s": round(self.elapsed_s, 3),
            "error": self.error,
            "run_id": self.run_id,
            "sandbox": self.sandbox,
            "model": self.model,
            "cells": self.cells,
        }
