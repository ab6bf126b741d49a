"""Reading an answer out of a reply without running it: the forced final answer at a limit may come as
an `answer = {...}` assignment or `answer["content"] = ...` in a code block when its REPL can no longer
run code (the run's time is up); literal values only, read with `ast.literal_eval`, never executed."""

from __future__ import annotations

import ast
from typing import Any

from rlmx.answer import Answer
from rlmx.repl import syntax

_UNSET = object()


def literal_answer(code_blocks: list[str]) -> Answer | None:
    """The answer dict the blocks set with literals (`answer = {"content": ..., "ready": True}`, or
    `answer["content"] = ...`), the last assignment winning; None when they set none."""
    content: Any = _UNSET
    for code in code_blocks:
        try:
            tree = syntax.parse(code)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    value = _assigned_content(target, node.value)
                    if value is not _UNSET:
                        content = value
    if content is _UNSET:
        return None
    return Answer(
        content if isinstance(content, (str, int, float, bool, list, dict)) else str(content), "answer_dict"
    )


def _assigned_content(target: ast.expr, value: ast.expr) -> Any:
    if isinstance(target, ast.Name) and target.id == "answer" and isinstance(value, ast.Dict):
        for key, item in zip(value.keys, value.values, strict=True):
            if isinstance(key, ast.Constant) and key.value == "content":
                return _literal(item)
        return _UNSET
    if (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Name)
        and target.value.id == "answer"
        and isinstance(target.slice, ast.Constant)
        and target.slice.value == "content"
    ):
        return _literal(value)
    return _UNSET


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _UNSET
