"""Scripted model behaviour for tests: functions of the messages and of the call, as a ScriptedServer
policy (`policy(messages, request)`) and a FunctionLM (`fn(messages, settings)`) are called.

What kind of call it is comes from the call itself: `purpose`, `depth` and `iteration`, which rlmx sets
on every call (`CallSettings`; over HTTP the x-rlmx-* headers a `ScriptedRequest` reads). Nothing here
looks at prompt text to tell a root turn from a child's, a sub-call or the forced final answer;
`turn`, `question` and `last_user` only read the conversation so far.
"""

from __future__ import annotations

import re
from typing import Any

from rlmx.testing import CallInfo, ScriptedModel
from rlmx.testing.scripted import SUB_PURPOSES, TURN_PURPOSES


def is_rlm(call: CallInfo) -> bool:
    """A call an RLM makes for its own reply, at any depth: its turns and its forced final answer
    (not a sub-call from its code, not a compaction summary)."""
    return call.purpose in TURN_PURPOSES or call.purpose == "final"


def is_root(call: CallInfo) -> bool:
    """The root RLM's own call (depth 0): a turn or its forced final answer."""
    return is_rlm(call) and call.depth == 0


def is_child(call: CallInfo) -> bool:
    """A child RLM's own call (depth 1 or more): a turn or its forced final answer."""
    return is_rlm(call) and (call.depth or 0) >= 1


def is_sub(call: CallInfo) -> bool:
    """A plain call made by model code: llm_query, or rlm_query falling back at the depth limit."""
    return call.purpose in SUB_PURPOSES


def is_forced_final(call: CallInfo) -> bool:
    """The one call for an answer after a limit stopped the run."""
    return call.purpose == "final"


def turn(messages: list[dict[str, Any]]) -> int:
    """How many replies this RLM has already given (0 on its first turn)."""
    return sum(1 for m in messages if m["role"] == "assistant")


def question(messages: list[dict[str, Any]]) -> str:
    """The question an RLM was asked (the text after "Question:" in its first user message)."""
    match = re.search(r"Question: (.*)", messages[1]["content"], re.DOTALL)
    return match.group(1).strip() if match else ""


def last_user(messages: list[dict[str, Any]]) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


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


TICKETS = ScriptedModel(root=TICKETS_TURNS, sub=classify_ticket, final="FINAL(unknown)")


def tickets_policy(messages: list[dict[str, Any]], request: CallInfo) -> str:
    """The tickets script as a policy or a FunctionLM's function: explores, classifies each ticket of
    the three users with a sub-call, and answers the count (`TICKETS.reply`: nothing is recorded)."""
    return TICKETS.reply(messages, request)
