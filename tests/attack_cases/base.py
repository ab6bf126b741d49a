"""What an attack is: model-written code, how its run must end, and what the model must have been told.

Code is a `string.Template`: $PORT, $UDP, $DNS (the host's listeners), $IP (the host's non-loopback
address), $HOST_PID, $PLANTED (a secret file outside the sandbox), $TMP (a host directory), $REPO
(the checkout under test), $TOKEN, $ABSTRACT and $UNIXPATH (unix sockets the host listens on), $URL
(the model server). Values the host
checks for (secrets) never appear literally in the code: the code must find them, and it cannot.
Every attack starts with `leak(label, value)`, which prints a value and sends it out via `llm_query`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PRELUDE = """
def leak(label, value):
    text = value.decode('utf-8', 'replace') if isinstance(value, bytes) else str(value)
    print(label, text[:1500])
    try:
        llm_query('LEAK ' + label + ' ' + text[:100000])
    except Exception as exc:
        print('leak refused:', type(exc).__name__)
"""


@dataclass
class Attack:
    id: str
    title: str
    code: str
    # "continues": the run goes on; "error": it ends with a protocol error; "limit": the ledger ends it
    ends: str = "continues"
    said: tuple[str, ...] = ()  # what the sandbox must have reported to the model (any of them)
    # the same under the Landlock layer, where it differs (no namespaces: the kernel refuses by
    # Landlock or seccomp -- EACCES/EPERM -- where the namespaces hide things: ENOENT, ENETUNREACH)
    said_landlock: tuple[str, ...] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    sub: str = "sub-ok"  # what the scripted sub-model answers
    check: Callable[..., None] | None = None  # check(host, outcome): extra assertions on the host


ATTACKS: list[Attack] = []


def attack(id_: str, title: str, code: str, **kw: Any) -> None:
    ATTACKS.append(Attack(id_, title, PRELUDE + code, **kw))
