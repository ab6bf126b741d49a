"""Test instruments that ship with rlmx: function-backed models and a scripted OpenAI-compatible server.

    from rlmx.testing import FunctionLM, ScriptedServer, forbid_real_providers

`forbid_real_providers()` makes any model pointing at a non-loopback address fail at construction, so a
test suite can never reach a real provider (and spend money) by accident.
"""

from __future__ import annotations

import os

from rlmx.lm.openai_compat import FORBID_ENV
from rlmx.testing.models import FunctionLM
from rlmx.testing.server import Fault, Reply, ScriptedRequest, ScriptedServer, random_faults


def forbid_real_providers(enabled: bool = True) -> None:
    """Switch on (or off) the process-wide ban on calls to non-loopback model endpoints."""
    if enabled:
        os.environ[FORBID_ENV] = "1"
    else:
        os.environ.pop(FORBID_ENV, None)


__all__ = [
    "Fault",
    "FunctionLM",
    "Reply",
    "ScriptedRequest",
    "ScriptedServer",
    "forbid_real_providers",
    "random_faults",
]
