"""Golden files for the snapshot tests (tests/test_golden*.py): compare a rendering with its recorded
file under tests/golden/, or rewrite that file when RLMX_UPDATE_GOLDEN=1.

Recorded JSON is normalised first: a volatile value (a time, a token count, a random id) becomes its
type, e.g. "<float>", so the file records that the key is there and what it holds; known volatile
strings (temporary paths, run ids, server URLs) inside other strings become placeholders such as
"<tmp>"; everything else is kept as it is. Files are JSON with sorted keys and indentation.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE_ENV = "RLMX_UPDATE_GOLDEN"

# values that change from run to run wherever they appear: token counts (the scripted server counts
# characters of prompts that can name temporary paths), times and durations
TOKENS = frozenset(
    {
        "input_tokens",
        "output_tokens",
        "cached_tokens",
        "reasoning_tokens",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
    }
)
TIMES = frozenset({"t", "elapsed_s", "duration_s", "wall_time_s", "created"})
VOLATILE = TOKENS | TIMES

STAMP = re.compile(r"\b\d{8}T\d{6}\b")  # a time in a file name, e.g. serve's 20260101T120000-<run_id>
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def updating() -> bool:
    return os.environ.get(UPDATE_ENV) == "1"


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "str"}.get(type(value), type(value).__name__)


def shape(value: Any) -> Any:
    """The value with every leaf replaced by its type: dicts keep their keys, lists their length."""
    if isinstance(value, dict):
        return {str(k): shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    return f"<{type_name(value)}>"


def normalise(value: Any, *, volatile: Iterable[str] = (), subs: Mapping[str, str] | None = None) -> Any:
    """`value` with the values under `VOLATILE` and `volatile` keys reduced to their shape, and each
    key of `subs` replaced by its placeholder in every string (longest first), times in names by <stamp>."""
    keys = VOLATILE | frozenset(volatile)
    pairs = sorted((subs or {}).items(), key=lambda kv: -len(kv[0]))

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): shape(x) if k in keys else walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str):
            for old, new in pairs:
                if old:
                    v = v.replace(old, new)
            return STAMP.sub("<stamp>", v)
        return v

    return walk(value)


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def check_text(name: str, text: str) -> None:
    """`text` must equal tests/golden/`name` (with RLMX_UPDATE_GOLDEN=1: it is written there)."""
    path = GOLDEN / name
    if updating():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.is_file(), f"no golden file {path}; record it with {UPDATE_ENV}=1"
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=f"golden/{name}",
            tofile="now",
        )
        raise AssertionError(
            f"{name} differs from its golden file (if deliberate: {UPDATE_ENV}=1):\n" + "".join(diff)
        )


def check_json(name: str, value: Any) -> None:
    """`value` (already normalised) as sorted, indented JSON must equal tests/golden/`name`."""
    check_text(name, dumps(value))


def plain(text: str) -> str:
    """Terminal text without colour codes and trailing blanks (rich pads lines to the width)."""
    return "".join(line.rstrip() + "\n" for line in ANSI.sub("", text).splitlines())
