"""Test doubles know what a call is for (`purpose`, `depth`, `iteration`); none of them guesses it from
the prompt's text or shape any more. This file keeps it that way: it reads every test, example,
benchmark policy, the evals' oracle and the README's Python, and fails on code that recognises a root
turn, a child's turn, a sub-call, the forced final answer, a compaction or a correction by the words
of rlmx's prompts or by the role of the first message.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The opening words of the prompts that mark each kind of call.
MARKERS = (
    "You are a Recursive Language Model",  # an RLM's system prompt: root and child turns
    "The run has reached a limit",  # the forced final answer
    "You condense the working notes",  # compaction
    "Your final answer was not accepted",  # the correction after a rejected typed answer
)
SHORTEST_PIECE = 12  # "You are a Recursive" or "Recursive Language Model" sniff as the whole sentence does

# Files allowed to look, and why. Anything else that does fails the test.
ALLOWED = {
    # the peer frameworks (rlms, dspy) send no purpose: their requests are told apart by shape; rlmx's
    # requests there are decided by request.purpose first
    "benchmarks/policies.py": "roles",
    # one policy for both the official runtime and rlmx, to compare their message skeletons
    "benchmarks/peers/skeletons.py": "roles",
    "tests/engine/test_call_kinds.py": "markers",  # this file
}


def sources() -> list[tuple[str, str]]:
    """(name, Python source) of everything checked: tests, examples, benchmarks, evals, README code."""
    files = [*ROOT.glob("tests/**/*.py"), *ROOT.glob("examples/**/*.py"), *ROOT.glob("benchmarks/**/*.py")]
    files += ROOT.glob("src/rlmx/evals/**/*.py")
    ours = [path for path in files if ".venvs" not in path.parts]  # the peers' own environments are not ours
    out = [(str(path.relative_to(ROOT)), path.read_text()) for path in sorted(ours)]
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    out += [(f"README.md (python block {i + 1})", block) for i, block in enumerate(blocks)]
    return out


def sniffs_text(value: str) -> bool:
    """The string holds one of the markers, or is a long enough piece of one."""
    piece = value.strip()
    return any(marker in value or (len(piece) >= SHORTEST_PIECE and piece in marker) for marker in MARKERS)


def first_message_role(node: ast.AST) -> bool:
    """`X[0]["role"]` or `X[0].get("role")`: the role of a request's first message."""
    if isinstance(node, ast.Subscript) and _is_const(node.slice, "role"):
        inner = node.value
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and _is_const(node.args[0], "role")
    ):
        inner = node.func.value
    else:
        return False
    return isinstance(inner, ast.Subscript) and _is_const(inner.slice, 0)


def _is_const(node: ast.AST, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value == value and type(node.value) is type(value)


def findings(source: str) -> list[str]:
    """Where `source` recognises a call by prompt text or by its first message's role."""
    tree = ast.parse(source)
    # left alone: message content in a dict display (data, not a check), and whatever an assert
    # statement says about a prompt's words or its messages' roles (a test of what rlmx sends, not a
    # decision about which call it is)
    data_values: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            data_values.update(id(v) for v in node.values if v is not None)
        elif isinstance(node, ast.Assert):
            data_values.update(id(n) for n in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in data_values:
            if sniffs_text(node.value):
                found.append(f"line {node.lineno}: prompt text {node.value[:40]!r}")
        elif isinstance(node, ast.Compare) and id(node) not in data_values:
            sides = [node.left, *node.comparators]
            roles = any(first_message_role(s) for s in sides)
            if roles and any(_is_const(s, "system") or _is_const(s, "user") for s in sides):
                found.append(f"line {node.lineno}: the first message's role decides")
    return found


def test_no_test_double_recognises_a_call_from_its_prompt() -> None:
    problems = []
    for name, source in sources():
        allowed = ALLOWED.get(name, "")
        for finding in findings(source):
            if ("prompt text" in finding and "markers" in allowed) or (
                "role" in finding and "roles" in allowed
            ):
                continue
            problems.append(f"{name}: {finding}")
    assert problems == [], (
        "read what a call is for from request.purpose / settings.purpose (and .depth, .iteration), "
        "e.g. with tests/policies.py's is_rlm, is_root, is_child, is_sub, is_forced_final:\n"
        + "\n".join(problems)
    )


def test_only_test_cli_edges_still_uses_the_sniffing_helpers() -> None:
    users = [
        name
        for name, source in sources()
        if re.search(r"^\s*(from|import) sniffing_policies\b", source, re.MULTILINE)
    ]
    assert users == []  # test_cli_edges.py has moved to policies.py's helpers too
    assert not (ROOT / "tests" / "sniffing_policies.py").exists()


def test_the_markers_are_the_words_rlmx_really_sends() -> None:
    prompts = [*(ROOT / "src/rlmx/prompts").glob("*.md"), *(ROOT / "src/rlmx/engine").glob("*.py")]
    texts = " ".join(" ".join(path.read_text().split()) for path in prompts)
    for marker in MARKERS:
        assert marker in texts, f"{marker!r} is in no prompt any more: update MARKERS"


@pytest.mark.parametrize(
    "snippet",
    [
        'def p(m, r):\n    return "a" if m[0]["content"].startswith("You are a Recursive") else "b"',
        'ROOT_MARK = "You are a Recursive Language Model"',
        'def p(m, r):\n    return "x" if "Recursive Language Model" in m[0]["content"] else "y"',
        'def p(m, r):\n    return "x" if "The run has reached a limit" in m[-1]["content"] else "y"',
        'def p(m, r):\n    return "x" if m[0]["role"] == "system" else "y"',
        'def p(m, r):\n    return "x" if m[0].get("role") == "user" else "y"',
        'def p(m, r):\n    return "s" if m[0]["content"].startswith("You condense") else "t"',
    ],
)
def test_the_check_catches_sniffing(snippet: str) -> None:
    assert findings(snippet)


@pytest.mark.parametrize(
    "snippet",
    [
        'history = [{"role": "system", "content": "You are a Recursive Language Model."}]',
        'def p(m, r):\n    return "x" if r.purpose == "root" else "y"',
        'users = [m["content"] for m in messages if m["role"] == "user"]',  # every message, not the first
        'assert "## Answer format" in system',
        'assert "was not accepted" in feedback and "reached a limit" in last_user(messages)',
        'assert opening[0]["role"] == "system" and opening[1]["role"] == "user"',  # the shape sent
    ],
)
def test_the_check_leaves_data_and_purposes_alone(snippet: str) -> None:
    assert findings(snippet) == []
