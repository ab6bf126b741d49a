"""`VerbosePrinter`: what `verbose=True` prints, one plain line per event on stderr (rlmx prints no
rich panels)."""

from __future__ import annotations

import sys
from typing import Any


class VerbosePrinter:
    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled

    def say(self, text: str) -> None:
        if self.enabled:
            print(f"[rlm] {text}", file=sys.stderr, flush=True)

    def print_metadata(self, metadata: Any) -> None:
        data = metadata.to_dict()
        self.say(
            f"{data['backend']}:{data['root_model']}, max_depth={data['max_depth']}, "
            f"max_iterations={data['max_iterations']}, environment={data['environment_type']}"
        )

    def print_reply(self, number: int, reply: str) -> None:
        """A root reply, as it arrives: its turn and its first line."""
        first = reply.strip().splitlines()[:1]
        self.say(f"iteration {number}: {first[0][:100] if first else '(empty reply)'}")

    def print_iteration(self, iteration: Any, number: int) -> None:
        first = (iteration.response or "").strip().splitlines()[:1]
        self.say(
            f"iteration {number}: {len(iteration.code_blocks)} block(s); {first[0][:100] if first else ''}"
        )

    def print_final_answer(self, answer: Any) -> None:
        self.say(f"final answer: {str(answer)[:200]}")

    def print_summary(self, iterations: int, seconds: float, usage: dict[str, Any]) -> None:
        self.say(f"{iterations} iteration(s) in {seconds:.2f}s; usage {usage}")

    def print_limit_exceeded(self, kind: str, detail: str) -> None:
        self.say(f"limit exceeded ({kind}): {detail}")
