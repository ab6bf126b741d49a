"""The README's Python examples that need no real provider are executed as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def python_block_after(heading: str) -> str:
    text = README.read_text()
    section = text.split(heading, 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, f"no python block after {heading!r}"
    return match.group(1)


def test_testing_quickstart_runs_as_written() -> None:
    code = python_block_after("## Test your own pipelines")
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)  # it asserts its own result
    assert namespace["result"].answer == 3  # type: ignore[attr-defined]
