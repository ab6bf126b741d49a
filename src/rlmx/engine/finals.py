"""The answer of the forced final reply at a limit (`forced_answer`), and reading one out of a reply
without running it: it may come as an `answer = {...}` assignment or `answer["content"] = ...` in a code
block when its REPL can no longer run code (the run's time is up); literal values only, read with
`ast.literal_eval`, never executed."""

from __future__ import annotations

import ast
from typing import Any

from rlmx.answer import Answer, from_wire
from rlmx.engine.parse import parse_reply, prose_of
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


async def forced_answer(node: Any, reply: str) -> Answer:
    """The answer of `node`'s (an `rlmx.engine.node.Node`, not imported here) forced final reply, in every form: its code blocks run (sub-calls refused)
    while the REPL is alive; when it is not, an `answer = {...}` in them is read as a literal; then a
    FINAL line; then its prose. None (with why) when the reply holds no answer."""
    dialect = node.state.profile.dialect
    if dialect.whole_reply_is_answer:
        return Answer(reply, "prose") if reply.strip() else Answer.none("the final reply was empty")
    parsed = parse_reply(reply, node.state.profile.runnable, finals=dialect.honours_final_text)
    if parsed.code_blocks and node.repl.alive:
        for code in parsed.code_blocks:
            result = await node._exec(code, sub_calls=False)
            if result.final is not None and result.error is None:
                return from_wire(result.final)
    elif parsed.code_blocks:
        literal = literal_answer(parsed.code_blocks)
        if literal is not None:
            return literal
    problem = "the model's final reply held no answer"
    if parsed.final is not None:
        answer, resolve_problem = await node._resolve(parsed.final)
        if resolve_problem is None:
            return answer
        problem = resolve_problem
    text = prose_of(reply)
    return Answer(text, "prose") if text else Answer.none(problem)
