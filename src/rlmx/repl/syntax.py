"""Python source to code, one thread at a time.

CPython 3.11 counts the depth of its AST conversion (`ast.parse`, and `compile` of an AST) in one
place per interpreter, not per thread; two threads converting at once can fail with "AST constructor
recursion depth mismatch". The in-process sandbox runs cells (and the model's own `ast.parse` calls)
in threads beside the host, which parses too (a literal `answer` dict): every conversion in rlmx goes
through this lock, and `install()` makes `ast.parse` itself take it in that process."""

from __future__ import annotations

import ast
import threading
from types import CodeType
from typing import Any

_LOCK = threading.Lock()
_PARSE = ast.parse


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> Any:
    with _LOCK:
        return _PARSE(source, filename, mode)


def compile_tree(tree: ast.Module | ast.Expression, filename: str, mode: str) -> CodeType:
    with _LOCK:
        return compile(tree, filename, mode)


def _locked_parse(*args: Any, **kwargs: Any) -> Any:
    with _LOCK:
        return _PARSE(*args, **kwargs)


def install() -> None:
    """`ast.parse` takes the lock too, for code that calls it itself (the in-process sandbox's cells)."""
    ast.parse = _locked_parse  # type: ignore[assignment]
