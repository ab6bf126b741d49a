"""The prompt dialects as objects (`rlmx.engine.dialect`, with the worker's half in `rlmx.repl.dialect`):
chosen once from the profile, asked for what differs, and never compared by name anywhere else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlmx.engine.dialect import OFFICIAL, RLMX, dialect_named, template_dialect
from rlmx.engine.profiles import PromptProfile
from rlmx.repl import dialect as repl_dialect
from rlmx.sandbox.base import ExecResult

SRC = Path(__file__).resolve().parents[2] / "src" / "rlmx"
DIALECT_MODULES = {SRC / "engine" / "dialect.py", SRC / "repl" / "dialect.py"}
# a dialect's name compared, or a dialect / profile compared with a string
COMPARISON = re.compile(
    r"""[=!]=\s*["'](official|rlmx)["']|["'](official|rlmx)["']\s*[=!]=|\bdialect\s*[=!]=|\bprofile\s*[=!]=\s*["']"""
)


def test_no_dialect_is_compared_by_name_outside_the_dialect_modules() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path in DIALECT_MODULES:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if COMPARISON.search(line.split("#", 1)[0]):
                found.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert found == [], "compare a Dialect's fields or call its methods instead:\n" + "\n".join(found)


def test_the_scan_would_see_a_comparison() -> None:
    for line in ['if dialect == "official":', "x = profile != 'rlmx'", 'ok = "official" == name']:
        assert COMPARISON.search(line), line
    assert not COMPARISON.search('BUILT_IN = {"rlmx": "system.md", "official": "official.md"}')


def test_a_profile_carries_its_dialect_object() -> None:
    assert PromptProfile.of().dialect is RLMX and PromptProfile.of("official").dialect is OFFICIAL
    assert OFFICIAL.repl is repl_dialect.OFFICIAL and RLMX.repl is repl_dialect.RLMX
    assert dialect_named("official") is OFFICIAL
    with pytest.raises(ValueError, match="unknown dialect 'x'"):
        dialect_named("x")


def test_a_template_names_its_dialect_on_its_first_line(tmp_path: Path) -> None:
    assert template_dialect("<!-- dialect: official -->\nbody") == (OFFICIAL, "body")
    assert template_dialect("<!-- a comment -->\n\nbody") == (RLMX, "body")
    assert template_dialect("body <!-- dialect: official -->") == (RLMX, "body <!-- dialect: official -->")
    path = tmp_path / "mine.md"
    path.write_text("<!-- dialect: official -->\nYou are {{sub_model}}.")
    profile = PromptProfile.of(str(path))
    assert profile.dialect is OFFICIAL and profile.template == "You are {{sub_model}}."
    assert profile.runnable == frozenset({"repl"})


def test_what_differs_is_asked_of_the_object() -> None:
    assert RLMX.rejects_answer_of_failed_block and not OFFICIAL.rejects_answer_of_failed_block
    assert OFFICIAL.child_context_is_prompt and not RLMX.child_context_is_prompt
    assert "python" in RLMX.runnable and OFFICIAL.runnable == {"repl"}
    assert RLMX.turn_prompt(1, 5) is None and OFFICIAL.turn_prompt(2, 5) == "Turn 2/5:"
    assert RLMX.repl.echo_last_expression and not OFFICIAL.repl.echo_last_expression
    assert OFFICIAL.repl.list_variables and OFFICIAL.repl.answer_reserved and OFFICIAL.repl.history_is_first
    result = ExecResult(output="hi\n", error="Traceback...\nKeyError: 'x'", variables=["a"])
    official = OFFICIAL.feedback([result], [], iteration=1, max_iterations=5, calls_left=3)
    assert official == "REPL output:\nhi\n\nKeyError: 'x'\n\nREPL variables: ['a']"
    rlmx = RLMX.feedback([result], ["note"], iteration=1, max_iterations=5, calls_left=3)
    assert rlmx.endswith("Output:\nhi\nTraceback...\nKeyError: 'x'\n\nnote")
