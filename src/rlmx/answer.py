"""`Answer`: the one type for an answer, from the model's reply to the run's result.

A FINAL(...) in a reply, a FINAL_VAR(name) not yet read from the REPL, the value a code cell handed to
FINAL/FINAL_VAR (decoded from the worker's wire frame), an answer checked against an output schema, and
the answer a run returns are all `Answer`s: `value` and where it came from (`source`), plus what a
schema made of it (`parsed`), what it found wrong (`problems`), or why it was refused for good (`error`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from rlmx.outcomes import AnswerSource


@dataclass(frozen=True)
class Answer:
    value: Any = None  # a str, or a JSON value from FINAL_VAR; None when there is none
    source: AnswerSource = "none"  # final | final_var | prose | none
    var: str | None = None  # FINAL_VAR(name) written in a reply: the variable still to be read
    parsed: Any = None  # the typed answer, when an output schema accepted it
    problems: str | None = None  # what an output schema found wrong (told to the model)
    error: str | None = None  # refused for good (its schema's corrections are used up)

    @classmethod
    def none(cls, error: str | None = None) -> Answer:
        return cls(error=error)

    @property
    def given(self) -> bool:
        """The model gave an answer (its value may still have to pass a schema)."""
        return self.source != "none"

    @property
    def accepted(self) -> bool:
        return self.given and self.problems is None and self.error is None

    def text(self) -> str:
        """The value as text: a str as is, anything else as JSON."""
        return answer_text(self.value)

    def refused(self, error: str) -> Answer:
        return replace(self, error=error)


def answer_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def from_wire(frame: dict[str, Any]) -> Answer:
    """The answer a code cell gave (the worker's `final` frame: `kind`, and `json` or `text`)."""
    value = frame["json"] if "json" in frame else frame.get("text", "")
    kind = frame.get("kind")
    source: AnswerSource = (
        "final_var" if kind == "final_var" else "answer_dict" if kind == "answer_dict" else "final"
    )
    return Answer(value, source)
