"""The pieces the differential scenarios are written with: the Scenario record, `repl`/`answer`
helpers for model turns and the scripts several scenarios share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from diff_policies import Script


def repl(*lines: str, text: str = "") -> str:
    body = "\n".join(lines)
    return f"{text}\n```repl\n{body}\n```" if text else f"```repl\n{body}\n```"


def answer(expr: str) -> list[str]:
    return [f"answer['content'] = {expr}", "answer['ready'] = True"]


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    script: Callable[[], Script]
    calls: list[dict[str, Any]]
    rlm: dict[str, Any] = field(default_factory=dict)
    tools: str | None = None
    logger: str | None = None  # None, "memory" or "dir"
    callbacks: bool = False
    keep_system: bool = False  # compare the system prompt's text too (a custom_system_prompt)
    concurrent: bool = False  # sub-RLMs run at once: the callbacks' order does not count
    interrupt_at_root: int | None = None  # SIGINT to the driver when this root turn (0-based) is asked for
    timeout_s: float = 180.0

    def rlm_kwargs(self) -> dict[str, Any]:
        base = {
            "backend": "openai",
            "backend_kwargs": {"model_name": "scripted", "api_key": "x"},
            "environment": "local",
            "max_iterations": 5,
        }
        return {**base, **self.rlm}


CTX = "alpha beta gamma\ndelta 7\n"


def sub_call_script() -> Script:
    return Script(
        root=[
            repl("r = llm_query('What is 2+2? Reply with a number.')", "print(r)", text="Ask a sub-model."),
            repl(*answer("r")),
        ],
        sub="4",
    )


def loop_script(turn: str) -> Callable[[], Script]:
    return lambda: Script(root=[turn])
