"""A batch's input: one JSON object a line, checked whole before anything runs.

    {"id": "t-001", "question": "How many ...?", "context": "data/t-001.txt"}
    {"id": "t-002", "question": "...", "context": ["logs/", "notes.md"], "model": "openai:gpt-5-mini"}
    {"id": "t-003", "question": "...", "context": {"text": "inline text"}, "limits": {"max_iterations": 8}}

`id` (a string or an integer, unique) and `question` are required. `context`: a path, a list of paths or
`{"text": ...}`; relative paths resolve against the driver's working directory (ray workers need the same
path). Optional: `model`, `sub_model`, `limits` (any of `rlmx.Limits`'s fields), `output_schema` (a JSON
schema, or a schema file's path), and `meta` (any JSON value, copied to the item's result line).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rlmx.errors import ConfigError
from rlmx.limits import Limits

KEYS = ("id", "question", "context", "model", "sub_model", "limits", "output_schema", "meta")
LIMIT_KEYS = tuple(f.name for f in fields(Limits))
MAX_LISTED = 20  # bad lines named in the error; the rest are counted


class BatchInputError(ConfigError):
    """Lines of a batch's input that cannot run, each named by its line number."""

    def __init__(self, source: str, problems: list[str]) -> None:
        problems = sorted(problems, key=line_number)
        shown = problems[:MAX_LISTED]
        more = f"\n  ... and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
        lines = "\n".join(f"  {p}" for p in shown)
        super().__init__(
            f"{source}: {len(problems)} bad input line{'s' if len(problems) != 1 else ''}; nothing was run:\n"
            f"{lines}{more}"
        )
        self.problems = problems


def line_number(problem: str) -> int:
    """The N of a problem written "line N: ..."."""
    return int(problem.split(":", 1)[0].split()[1])


@dataclass(frozen=True)
class BatchItem:
    id: str | int
    question: str
    # None (no context), ("path", ...) absolute paths, or {"text": ...}
    context: tuple[str, ...] | dict[str, str] | None = None
    model: str | None = None
    sub_model: str | None = None
    limits: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | str | None = None
    meta: Any = None
    line: int = 0

    @property
    def key(self) -> str:
        """The id as the results file knows it (ids 7 and "7" are the same item)."""
        return str(self.id)

    def context_key(self) -> str:
        """Items with the same context share one loaded copy (and, on ray, one shipped copy)."""
        return json.dumps(self.context, sort_keys=True)


def read_items(source: str | os.PathLike[str], *, cwd: Path | None = None) -> list[BatchItem]:
    """The items of a JSONL file, or BatchInputError naming every bad line."""
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"batch input {path} not found; give a JSONL file, one item a line") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read batch input {path}: {exc}") from None
    rows: list[tuple[int, Any]] = []
    problems: list[str] = []
    # lines end at "\n" only: JSON strings may hold U+2028 and other characters str.splitlines() breaks at
    for number, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            problems.append(f"line {number}: not JSON ({exc.msg} at column {exc.colno})")
    return check_items(rows, source=str(path), cwd=cwd, problems=problems)


def check_items(
    rows: Iterable[tuple[int, Any]] | Iterable[Mapping[str, Any]],
    *,
    source: str = "items",
    cwd: Path | None = None,
    problems: list[str] | None = None,
) -> list[BatchItem]:
    """Items from parsed rows ((line number, object) pairs, or objects numbered from 1); every problem
    is collected, then raised at once."""
    problems = list(problems or [])
    cwd = cwd or Path.cwd()
    items: list[BatchItem] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(rows, 1):
        number, obj = row if isinstance(row, tuple) else (index, row)
        try:
            item = _item(obj, number, cwd)
        except ValueError as exc:
            problems.append(f"line {number}: {exc}")
            continue
        if item.key in seen:
            problems.append(
                f"line {number}: id {item.id!r} repeats line {seen[item.key]}; ids must be unique"
            )
            continue
        seen[item.key] = number
        items.append(item)
    if problems:
        raise BatchInputError(source, problems)
    return items


def _item(obj: Any, number: int, cwd: Path) -> BatchItem:
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - set(KEYS))
    if unknown:
        raise ValueError(
            f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; known: {', '.join(KEYS)}"
        )
    item_id = obj.get("id")
    if isinstance(item_id, bool) or not isinstance(item_id, (str, int)) or item_id == "":
        raise ValueError('"id" is required: a non-empty string or an integer')
    question = obj.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError('"question" is required: a non-empty string')
    for key in ("model", "sub_model"):
        value = obj.get(key)
        if value is not None and (not isinstance(value, str) or ":" not in value):
            raise ValueError(f'"{key}" must be a model string PROVIDER:MODEL, e.g. openai:gpt-5-mini')
    return BatchItem(
        id=item_id,
        question=question,
        context=_context(obj.get("context"), cwd),
        model=obj.get("model"),
        sub_model=obj.get("sub_model"),
        limits=_limits(obj.get("limits")),
        output_schema=_schema(obj.get("output_schema"), cwd),
        meta=obj.get("meta"),
        line=number,
    )


def _context(value: Any, cwd: Path) -> tuple[str, ...] | dict[str, str] | None:
    if value is None:
        return None
    if isinstance(value, dict):
        if set(value) != {"text"} or not isinstance(value["text"], str):
            raise ValueError('"context" as an object must be {"text": "..."}')
        return {"text": value["text"]}
    paths = [value] if isinstance(value, str) else value
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p for p in paths):
        raise ValueError('"context" must be a path, a list of paths, or {"text": "..."}')
    resolved = []
    for given in paths:
        full = (cwd / Path(given).expanduser()).resolve()
        if not full.exists():
            raise ValueError(f"context {given!r} not found (resolved to {full})")
        resolved.append(str(full))
    return tuple(resolved)


def _limits(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError('"limits" must be an object, e.g. {"max_iterations": 8}')
    unknown = sorted(set(value) - set(LIMIT_KEYS))
    if unknown:
        raise ValueError(f"unknown limit {', '.join(unknown)}; known: {', '.join(LIMIT_KEYS)}")
    try:
        Limits(**value)
    except (ConfigError, TypeError) as exc:
        raise ValueError(str(exc)) from None
    return dict(value)


def _schema(value: Any, cwd: Path) -> dict[str, Any] | str | None:
    if value is None:
        return None
    if isinstance(value, str):
        full = (cwd / Path(value).expanduser()).resolve()
        if not full.is_file():
            raise ValueError(f"output_schema file {value!r} not found")
        value = str(full)
    elif not isinstance(value, dict):
        raise ValueError('"output_schema" must be a JSON schema object or a schema file\'s path')
    from rlmx.typed import OutputSpec, load_schema_file

    try:
        OutputSpec.of(load_schema_file(value) if isinstance(value, str) else value)
    except ConfigError as exc:
        raise ValueError(f"output_schema: {exc}") from None
    return value
