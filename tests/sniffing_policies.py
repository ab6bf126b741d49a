"""The prompt-sniffing helpers that tests/policies.py no longer has, kept for tests/test_cli_edges.py only.

That file may not be edited here beyond its imports; until it moves to the helpers of tests/policies.py
(`is_rlm(request)`, `is_forced_final(request)`: what the call says it is for), these recognise a call
from its prompt text, which is what everything else has stopped doing. tests/test_call_kinds.py checks
that nothing else imports this module; delete it once test_cli_edges.py has moved.
"""

from __future__ import annotations

from typing import Any

from policies import last_user

_SYSTEM_START = "You are a Recursive Language Model"
_FORCED_FINAL_START = "The run has reached a limit"


def is_root(messages: list[dict[str, Any]]) -> bool:
    """An RLM's own call (any depth), recognised by its system prompt."""
    return (
        bool(messages)
        and messages[0]["role"] == "system"
        and messages[0]["content"].startswith(_SYSTEM_START)
    )


def is_forced_final(messages: list[dict[str, Any]]) -> bool:
    """The forced final answer, recognised by the request's last user message."""
    return _FORCED_FINAL_START in last_user(messages)
