"""Test instruments that ship with rlmx: function-backed models, a scripted multi-turn model and a
scripted OpenAI-compatible server.

    from rlmx.testing import FunctionLM, ScriptedModel, ScriptedServer, forbid_real_providers

Test doubles are told what each call is for, never left to guess it from prompt text: a `FunctionLM`'s
function gets `settings.purpose`, `settings.depth` and `settings.iteration` (`rlmx.lm.base.CallSettings`),
and a `ScriptedServer` policy gets the same as `request.purpose`, `request.depth` and `request.iteration`
(`ScriptedRequest`, read from the x-rlmx-* headers rlmx sends to loopback endpoints only). Purposes:
"root" and "child_root" (an RLM's turn at depth 0 or below), "llm_query" and "fallback" (plain calls
from model code), "compaction", "final" (the forced final answer after a limit) and "correction" (a
root turn after a rejected typed answer). `ScriptedModel(root=[...], sub=..., final=...)` is a script
built on them that serves as either.

`forbid_real_providers()` makes any model pointing at a non-loopback address fail at construction, so a
test suite can never reach a real provider (and spend money) by accident.
"""

from __future__ import annotations

import os

from rlmx.lm.guard import FORBID_ENV
from rlmx.testing.models import FunctionLM
from rlmx.testing.scripted import CallInfo, ScriptedCall, ScriptedModel
from rlmx.testing.server import Fault, Reply, ScriptedRequest, ScriptedServer, random_faults


def forbid_real_providers(enabled: bool = True) -> None:
    """Switch on (or off) the process-wide ban on calls to non-loopback model endpoints."""
    if enabled:
        os.environ[FORBID_ENV] = "1"
    else:
        os.environ.pop(FORBID_ENV, None)


__all__ = [
    "CallInfo",
    "Fault",
    "FunctionLM",
    "Reply",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedRequest",
    "ScriptedServer",
    "forbid_real_providers",
    "random_faults",
]
