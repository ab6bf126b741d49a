"""The baselines' prompts are data files (rlmx/evals/prompts/*.md); this module fills them in."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

NOTES_MARKER = "You are reading a long context in parts"
NOTES_BUDGET = re.compile(r"Write the updated notes, at most (\d+) characters")
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@cache
def template(name: str) -> str:
    text = (
        resources.files("rlmx.evals").joinpath("prompts").joinpath(f"{name}.md").read_text(encoding="utf-8")
    )
    if text.startswith("<!--"):
        text = text.split("-->", 1)[1].lstrip("\n")
    return text


def fill(name: str, **values: object) -> str:
    """The template with its placeholders filled in one pass (inserted text is never re-read)."""
    text = template(name)
    unknown = set(values) - set(PLACEHOLDER.findall(text))
    if unknown:
        raise KeyError(f"prompt {name!r} has no placeholder for {sorted(unknown)}")
    return PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), m.group(0))), text)


def overhead_chars(name: str, question: str) -> int:
    """Characters a prompt takes besides its context slot."""
    return len(template(name)) + len(question)
