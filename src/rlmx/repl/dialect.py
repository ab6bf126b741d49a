"""What a prompt dialect changes inside the REPL: the worker's half of `rlmx.engine.dialect`.

The host picks a dialect once, from the prompt profile, and sends this record in the worker's settings
(`rlmx.sandbox.frames.WorkerSettings`). The worker acts on its fields and never on a dialect's name, so
a dialect is described here by what it does. Standard library only: the worker imports it at start.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)  # one class, made once: its generated methods cost little
class ReplDialect:
    name: str
    echo_last_expression: bool = True  # a cell's trailing expression is printed (as at a Python prompt)
    list_variables: bool = False  # each cell's result names the REPL's plain variables
    # `answer` is reserved like `context`, and a dict with a "ready" key bound to the name becomes the
    # REPL's own answer dict's contents
    answer_reserved: bool = False
    history_is_first: bool = False  # in a session, `history` is `history_0` (else this question's messages)
    final_functions: bool = True  # FINAL and FINAL_VAR are in the namespace (else a NameError, as officially)
    # the official runtime's names: `context_0` always, and the variables listed as its REPL lists them
    # (the scaffold's plain values first: answer, the user's values, context_0, context; then the rest)
    official_names: bool = False
    lists_history: bool = False  # with official_names: `history` listed after the user's values (compaction)


RLMX = ReplDialect("rlmx")
# the official RLM runtime: no echo, the variables listed after each block, the answer dict reserved
OFFICIAL = ReplDialect(
    "official", echo_last_expression=False, list_variables=True, answer_reserved=True, history_is_first=True
)
# the official runtime as `rlmx.compat.rlms` runs it: no FINAL / FINAL_VAR, only the answer dict ends a run
OFFICIAL_STRICT = ReplDialect(
    "official-strict",
    echo_last_expression=False,
    list_variables=True,
    answer_reserved=True,
    history_is_first=True,
    final_functions=False,
    official_names=True,
)
# the key of a `history` entry standing for a list of messages (a turn, under the strict official
# dialect): the host sends dicts only, the REPL puts the list in their place
SEGMENT = "rlmx_segment"
