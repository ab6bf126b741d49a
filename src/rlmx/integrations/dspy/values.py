"""What crosses between DSPy and the worker: variables in (as values, never as source code), tool results
back. Both become JSON the way DSPy's interpreters make them: Pydantic models by their JSON dump,
dataclasses and named tuples as dicts, tuples as lists, sets as (sorted) lists."""

from __future__ import annotations

import dataclasses
import json
import keyword
from typing import Any

from rlmx.context.payload import ContextPayload
from rlmx.integrations.dspy.classes import CodeInterpreterError

# names a variable may not take: the worker's own, and SUBMIT
TAKEN = frozenset({"SUBMIT", "__builtins__", "__name__"})


def check_name(name: Any, what: str = "variable") -> str:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise CodeInterpreterError(f"Invalid {what} name: {name!r} (it must be a Python identifier)")
    if name in TAKEN:
        raise CodeInterpreterError(f"Invalid {what} name: {name!r} is the interpreter's own")
    return name


def _pydantic(value: Any) -> Any:
    """A Pydantic model's JSON dump, or the `NotImplemented` marker for other values."""
    try:
        from pydantic import BaseModel
    except ImportError:  # pragma: no cover - DSPy depends on pydantic
        return NotImplemented
    if not isinstance(value, BaseModel):
        return NotImplemented
    try:
        return value.model_dump(mode="json")
    except Exception as exc:
        raise CodeInterpreterError(f"Unable to serialize {type(value).__name__} as JSON: {exc}") from exc


def _coerced(value: Any) -> Any:
    """What pydantic would write for a value JSON has no type for (datetime, enum, UUID, ...)."""
    try:
        from pydantic_core import to_jsonable_python
    except ImportError:  # pragma: no cover
        return NotImplemented
    try:
        return to_jsonable_python(value)
    except Exception:
        return NotImplemented


def to_json(value: Any, *, strict: bool) -> Any:
    """`value` as JSON values. `strict`: a value that has none raises CodeInterpreterError (a variable);
    else it is left as it is (a tool result, which then crosses as its str())."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    dumped = _pydantic(value)
    if dumped is not NotImplemented:
        return to_json(dumped, strict=strict)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            return to_json(dataclasses.asdict(value), strict=strict)
        except TypeError:
            pass
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return to_json(value._asdict(), strict=strict)
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): to_json(v, strict=strict) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v, strict=strict) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [to_json(v, strict=strict) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    coerced = _coerced(value)
    if coerced is not NotImplemented and coerced is not value:
        return to_json(coerced, strict=strict)
    if strict:
        raise CodeInterpreterError(
            f"Unsupported value type: {type(value).__name__} (a variable must be a JSON-like value: str, "
            "numbers, bool, None, lists, dicts, tuples, sets, Pydantic models, dataclasses)"
        )
    return value


def payload(value: Any) -> ContextPayload:
    """A variable as the worker takes it: text as it is (never JSON-escaped, a 40 MB string stays one
    piece), anything else as JSON (inf and nan included)."""
    if isinstance(value, str):
        return ContextPayload("inline-text", text=value)
    data = to_json(value, strict=True)
    return ContextPayload("inline-json", json.dumps(data, ensure_ascii=False).encode("utf-8"))


def tool_result(value: Any) -> Any:
    """A tool's result as the worker gets it: JSON values, else the result's str() (a NaN too)."""
    data = to_json(value, strict=False)
    try:
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError):
        return _text(value)
    return data


def _text(value: Any) -> str:
    try:
        return str(value)
    except Exception as exc:
        raise CodeInterpreterError(
            f"a tool result of type {type(value).__name__} has no str(): {exc}"
        ) from exc
