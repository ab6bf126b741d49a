"""Reading a model reply: which code to run, and whether it ends with FINAL(...) / FINAL_VAR(...)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from rlmx.answer import Answer

FENCE = re.compile(
    r"^[ \t]*```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL
)
RUNNABLE = {"repl", "python", "py", "python3", ""}
FINAL_START = re.compile(r"^[ \t]*(FINAL_VAR|FINAL)\(", re.MULTILINE)


@dataclass(frozen=True)
class ParsedReply:
    code_blocks: list[str]
    final: Answer | None  # FINAL(text): its value; FINAL_VAR(name): `var`, still to be read from the REPL
    skipped: int = 0  # fenced blocks of a language the profile does not run


def parse_reply(
    text: str, runnable: frozenset[str] | set[str] = RUNNABLE, *, finals: bool = True
) -> ParsedReply:
    """The code blocks to run (fences labelled with a language in `runnable`) and a FINAL line in the
    prose (not looked for when `finals` is False); `skipped` counts the non-empty blocks of other
    languages."""
    blocks: list[str] = []
    prose: list[str] = []
    skipped = 0
    pos = 0
    for match in FENCE.finditer(text):
        prose.append(text[pos : match.start()])
        if match.group(2).strip():
            if match.group(1).lower() in runnable:
                blocks.append(match.group(2))
            else:
                skipped += match.group(1).lower() in RUNNABLE  # code, of a kind this profile does not run
        pos = match.end()
    prose.append(text[pos:])
    final = None
    for segment in prose if finals else ():
        final = find_final(segment)
        if final:
            break
    return ParsedReply(blocks, final, skipped)


def find_final(segment: str) -> Answer | None:
    """A FINAL(...) or FINAL_VAR(...) standing on its own line (it may span lines) in prose."""
    for match in FINAL_START.finditer(segment):
        rest = segment[match.end() :]
        if match.group(1) == "FINAL_VAR":
            line = rest.split("\n", 1)[0].rstrip()
            if line.endswith(")"):
                return Answer(source="final_var", var=_unquote(line[:-1].strip()))
            continue
        # FINAL(...): the closing parenthesis ends a line (this one or a later one)
        for end in re.finditer(r"\)[ \t]*$", rest, re.MULTILINE):
            return Answer(_unquote(rest[: end.start()].strip()), "final")
    return None


def _unquote(arg: str) -> str:
    try:
        value = ast.literal_eval(arg)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return arg
    return value if isinstance(value, str) else arg


def prose_of(reply: str) -> str:
    """A reply's text without its code (closed fences, and an unclosed one to the end) and without
    FINAL/FINAL_VAR lines: what is left to show as an answer when the model gave no FINAL value."""
    text = FENCE.sub("", reply)
    opened = re.search(r"^[ \t]*```", text, re.MULTILINE)
    if opened:
        text = text[: opened.start()]
    kept = [line for line in text.splitlines() if not FINAL_START.match(line)]
    return "\n".join(kept).strip()
