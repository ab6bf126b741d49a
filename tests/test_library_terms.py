"""The library speaks in its own names: no string of `src/rlmx` outside the command line (`cli.py`,
`commands/`) names an `rlmx` flag; its messages name fields in backquotes (`max_cost_usd`), which the
command line turns into flags at its boundary (`rlmx.commands.run_options.cli_terms`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from rlmx.commands.run_options import cli_terms

SRC = Path(__file__).resolve().parent.parent / "src" / "rlmx"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]+(?:-[a-z0-9]+)*")
# flags of other programs a message may tell the user to run
OTHERS = {"--no-deps", "--head", "--port", "--host", "--chat_format", "--n_ctx", "--model"}
FRONT_ENDS = ("cli.py", "commands", "__main__.py")
OWN_COMMAND_LINES = {
    "testing/container.py",
    "commands/scripted_server.py",
}  # programs with flags of their own


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def flags_in_library() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC)
        if relative.parts[0] in FRONT_ENDS or relative.as_posix() in OWN_COMMAND_LINES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                for flag in FLAG.findall(node.value):
                    if flag not in OTHERS:
                        found.append(f"{relative}:{node.lineno}: {flag}")
    return found


def test_no_library_string_names_a_flag() -> None:
    assert flags_in_library() == []


def test_the_command_line_reads_library_names_as_its_flags() -> None:
    message = (
        "`max_cost_usd`=50.0 cannot be enforced; give x a price (`pricer`=Pricing({'openai:x': Price(IN, OUT)})"
        "), or pass `allow_unpriced`=True; "
        "`timeout_s`, `sub_top_p`, `models_by_depth` entry; `gitignore`=False; `not_an_option` stays"
    )
    assert cli_terms(message) == (
        "--max-cost-usd 50.0 cannot be enforced; give x a price (--price openai:x=IN,OUT), or pass "
        "--allow-unknown-price; --timeout, --sub-top-p, --depth-model entry; --no-gitignore; "
        "`not_an_option` stays"
    )
