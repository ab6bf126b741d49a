"""Prompts are data files (the `.md` files beside this module): `load` reads one, `fill` puts values
into its `{{name}}` slots. The prompt profiles (`rlmx.engine.profiles`) and typed answers use them."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any


@cache
def load(name: str) -> str:
    """The prompt file `name`, without its leading `<!-- ... -->` header comment."""
    text = resources.files("rlmx.prompts").joinpath(name).read_text(encoding="utf-8")
    if text.startswith("<!--"):
        text = text.split("-->", 1)[1].lstrip("\n")
    return text


def fill(template: str, **values: Any) -> str:
    for key, value in values.items():
        template = template.replace("{{" + key + "}}", str(value))
    return template


# The header of the user message that follows each turn. Its "calls left" counter is run bookkeeping:
# the response cache masks it (VOLATILE_IN_PROMPTS) so a replayed run hits the cache on every turn.
CALLS_LEFT = "model calls left in the run: "
VOLATILE_IN_PROMPTS = re.compile("(" + re.escape(CALLS_LEFT) + r")\d+")


def turn_header(turn: int, turns: int, calls_left: int) -> str:
    return f"[turn {turn} of {turns} done; {CALLS_LEFT}{calls_left}]"
