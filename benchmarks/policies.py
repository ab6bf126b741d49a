"""Scripted model behaviour for the benchmarks, written in each framework's own conventions.

The same scenario is scripted three ways:
- ``rlmx``: ```repl blocks, ``FINAL(...)`` / ``FINAL_VAR(...)`` (tests/policies.py's tickets policy as is);
- ``official`` (``rlms`` 0.1.3): ```repl blocks over ``context``; a run ends only when a cell sets
  ``answer["ready"] = True`` (that version does not parse FINAL);
- ``dspy`` (``dspy.RLM``): ChatAdapter fields ``[[ ## reasoning ## ]]`` / ``[[ ## code ## ]]``; ends with
  ``SUBMIT(answer=...)``. Its turn number is the ``iteration`` input field, not an assistant message count.

rlmx says what each call is for (`request.purpose`, from the x-rlmx-* headers it sends to a loopback
server); the other frameworks say nothing, so for them a root request is told apart by its shape: it
starts with a system message, where a sub-call is a lone user message.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from policies import classify_ticket, tickets_policy  # tests/policies.py: the tickets script

Messages = list[dict[str, Any]]
PolicyFn = Callable[[Messages, Any], str]
FRAMEWORKS = ("rlmx", "official", "dspy")
TICKET_PATTERN = r"\|\s*(12345|67890|11111)\s*\|"
TICKET_PROMPT = (
    "Is this support ticket about billing (charges, invoices, payments, refunds, fees)? "
    "Answer yes or no.\\n\\nTicket: "
)


def is_root(messages: Messages, request: Any) -> bool:
    """A turn of the run's RLM (its forced final answer included) rather than a sub-call."""
    purpose = getattr(request, "purpose", None)
    if purpose is not None:  # rlmx
        return purpose in ("root", "child_root", "correction", "final")
    return bool(messages) and messages[0]["role"] == "system"  # the peers: by the request's shape


def turn_of(framework: str, messages: Messages) -> int:
    """How many replies this run's root has already given (0 on its first turn)."""
    if framework == "dspy":
        match = re.search(r"\[\[ ## iteration ## \]\]\s*(\d+)/", messages[-1]["content"])
        return int(match.group(1)) - 1 if match else 0
    return sum(1 for m in messages if m["role"] == "assistant")


def code_reply(framework: str, code: str) -> str:
    code = code.strip()
    if framework == "dspy":
        return f"[[ ## reasoning ## ]]\nStep.\n\n[[ ## code ## ]]\n```python\n{code}\n```\n\n[[ ## completed ## ]]"
    return f"Step.\n```repl\n{code}\n```\n"


def finish_reply(framework: str, expr: str = "'done'") -> str:
    """A reply that ends the run with the value of the Python expression `expr`."""
    if framework == "rlmx":
        return f"FINAL_VAR({expr})" if expr.isidentifier() else f"FINAL({expr.strip(chr(39))})"
    if framework == "official":
        return code_reply(framework, f'answer["content"] = str({expr})\nanswer["ready"] = True')
    return code_reply(framework, f"SUBMIT(answer=str({expr}))")


def scripted(framework: str, turns: list[str], sub: Callable[[str], str]) -> PolicyFn:
    """Root replays `turns` (the last repeats); a sub-call is answered by `sub(prompt)`."""

    def policy(messages: Messages, request: Any = None) -> str:
        if not is_root(messages, request):
            return sub(messages[-1]["content"])
        return turns[min(turn_of(framework, messages), len(turns) - 1)]

    return policy


def tickets_turns(framework: str) -> list[str]:
    """The 4-turn tickets script (look, filter the three users with `re`, classify in one batch, finish)."""
    look = "print(type(context), len(context))\nprint(context[:400])"
    find = (
        "import re\n"
        f"hits = [line for line in context.splitlines() if re.search(r'{TICKET_PATTERN}', line)]\n"
        "print(len(hits), 'tickets from the three users')"
    )
    classify = (
        f'prompts = ["{TICKET_PROMPT}" + line.split("|", 2)[2].strip() for line in hits]\n'
        "labels = llm_query_batched(prompts)\n"
        "billing_count = sum(1 for label in labels if label.strip().lower().startswith('yes'))\n"
        "print(billing_count, 'of', len(labels))"
    )
    return [code_reply(framework, c) for c in (look, find, classify)] + [
        finish_reply(framework, "billing_count")
    ]


def make_policy(framework: str, scenario: str, *, turns: int = 20, batch: int = 1000) -> PolicyFn:
    """The policy of one scenario in one framework's conventions."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}")
    if scenario == "trivial":
        return scripted(framework, [finish_reply(framework, "'ok'")], lambda p: "sub")
    if scenario == "turns":  # `turns` trivial cells touching the context, then finish
        cell = code_reply(framework, "print(len(context))")
        return scripted(framework, [cell] * turns + [finish_reply(framework, "'done'")], lambda p: "sub")
    if scenario == "fanout":  # one batch of `batch` sub-calls, then finish
        cell = code_reply(
            framework, f"r = llm_query_batched(['item %d' % i for i in range({batch})])\nn = len(r)\nprint(n)"
        )
        return scripted(framework, [cell, finish_reply(framework, "n")], lambda p: "ok")
    if scenario == "tickets":  # ours: tests/policies.py's script as is (its grep() helper)
        if framework == "rlmx":
            return tickets_policy
        return scripted(framework, tickets_turns(framework), classify_ticket)
    if scenario == "tickets_re":  # the same steps with plain `re` in every framework (no match cap)
        return scripted(framework, tickets_turns(framework), classify_ticket)
    raise ValueError(f"unknown scenario {scenario!r}")
