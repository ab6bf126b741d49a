"""Scripted model behaviour for tests: functions of the messages, as the scripted server calls them."""

from __future__ import annotations

import re
from typing import Any

ROOT_MARKER = "You are a Recursive Language Model"


def is_root(messages: list[dict[str, Any]]) -> bool:
    return (
        bool(messages) and messages[0]["role"] == "system" and messages[0]["content"].startswith(ROOT_MARKER)
    )


def turn(messages: list[dict[str, Any]]) -> int:
    """How many replies this RLM has already given (0 on its first turn)."""
    return sum(1 for m in messages if m["role"] == "assistant")


def question(messages: list[dict[str, Any]]) -> str:
    match = re.search(r"Question: (.*)", messages[1]["content"], re.DOTALL)
    return match.group(1).strip() if match else ""


def last_user(messages: list[dict[str, Any]]) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def is_forced_final(messages: list[dict[str, Any]]) -> bool:
    return "The run has reached a limit" in last_user(messages)


def repl(code: str, prose: str = "") -> str:
    return f"{prose}\n```repl\n{code.strip()}\n```\n"


BILLING_WORDS = re.compile(
    r"\b(bill(ed|ing)?|charg(e|ed|es|ing)|invoice[sd]?|refund(ed|s)?|payment[s]?|pay|paid|receipt[s]?|"
    r"subscription fee|fee[s]?|price[sd]?|pricing|credit card|debit|card (was|got)|overcharg\w*|"
    r"renewal|proration|prorated|vat|tax(es)?|coupon|discount|plan cost|cost[s]?|money|dollars?|"
    r"from my account|bank statement)\b|[$€£]\s?\d",
    re.IGNORECASE,
)
NOT_BILLING = re.compile(r"battery charge|charging cable|free[- ]text|credits screen", re.IGNORECASE)


def scripted(*turns: str, sub: str = "sub-answer") -> Any:
    """A root that replays `turns` (the last one repeats; a forced final answer says "forced") and a
    sub-model that always says `sub`."""

    def policy(messages: list[dict[str, Any]], request: Any = None) -> str:
        if not is_root(messages):
            return sub
        if is_forced_final(messages):
            return "FINAL(forced)"
        return turns[min(turn(messages), len(turns) - 1)]

    return policy


def classify_ticket(text: str) -> str:
    """The scripted sub-model: judges whether the ticket text it is given is about billing."""
    ticket = text.rsplit("Ticket:", 1)[-1]
    return "yes" if BILLING_WORDS.search(NOT_BILLING.sub(" ", ticket)) else "no"


TICKETS_TURNS = [
    repl("print(type(context), len(context))\nprint(peek(0, 400))", "Let me look at the data first."),
    repl(
        r"""
hits = grep(r"\|\s*(12345|67890|11111)\s*\|")
print(len(hits), "tickets from the three users")
print(hits[:3])
""",
        "Now find the three users' tickets.",
    ),
    repl(
        """
prompts = [
    "Is this support ticket about billing (charges, invoices, payments, refunds, fees)? "
    "Answer yes or no.\\n\\nTicket: " + m.line.split("|", 2)[2].strip()
    for m in hits
]
labels = llm_query_batched(prompts)
billing_count = sum(1 for label in labels if label.strip().lower().startswith("yes"))
print(billing_count, "of", len(labels))
""",
        "Classify each ticket with a sub-model.",
    ),
    "The count is computed and checked.\nFINAL_VAR(billing_count)",
]


def tickets_policy(messages: list[dict[str, Any]], request: Any = None) -> str:
    if not is_root(messages):
        return classify_ticket(messages[-1]["content"])
    if is_forced_final(messages):
        return "FINAL(unknown)"
    return TICKETS_TURNS[min(turn(messages), len(TICKETS_TURNS) - 1)]
