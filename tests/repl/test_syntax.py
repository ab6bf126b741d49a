"""rlmx.repl.syntax: every AST conversion in the process takes one lock (CPython 3.11 counts its depth
per interpreter: two threads converting at once can fail), and `install()` extends it to `ast.parse`."""

from __future__ import annotations

import ast
import threading

from rlmx.repl import syntax


def test_parse_and_compile_match_the_standard_ones() -> None:
    code = "x = [i * 2 for i in range(3)]\nx"
    assert ast.dump(syntax.parse(code, "<cell>")) == ast.dump(ast.parse(code, "<cell>"))
    names: dict[str, object] = {}
    exec(syntax.compile_tree(syntax.parse(code), "<cell>", "exec"), names)
    assert names["x"] == [0, 2, 4]


def test_after_install_a_threads_ast_parse_waits_for_the_lock() -> None:
    original = ast.parse
    syntax.install()
    try:
        done = threading.Event()

        def parse_in_a_thread() -> None:
            ast.parse("answer = 42")  # what model code in the in-process sandbox calls
            done.set()

        with syntax._LOCK:  # another conversion under way
            thread = threading.Thread(target=parse_in_a_thread)
            thread.start()
            assert not done.wait(0.3), "ast.parse ran while the lock was held"
        assert done.wait(5) and ast.dump(ast.parse("a = 1")) == ast.dump(original("a = 1"))
        thread.join(5)
    finally:
        ast.parse = original  # type: ignore[assignment]
