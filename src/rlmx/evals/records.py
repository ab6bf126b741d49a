"""The suite's results file: one JSONL record per (item, method), appended as it is scored. The runner
writes it and skips what it holds on re-runs; the report reads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlmx.errors import ConfigError
from rlmx.evals.baselines import BASELINES

RESULTS = "results.jsonl"
METHODS = ("rlm", *BASELINES)


def load_records(out: Path) -> list[dict[str, Any]]:
    path = out / RESULTS
    if not path.exists():
        return []
    records = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number < len(lines):
                raise ConfigError(f"{path}:{number} is not JSON; fix or remove that line") from None
    return records  # a torn last line (a run killed mid-write) is ignored and redone


def latest(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The last record of every (item, method)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        out[(record["item_id"], record["method"])] = record
    return out
