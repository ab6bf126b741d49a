"""Helpers for the `rlmx batch` tests (local and Ray): a folder of support-ticket contexts with their gold
answers, JSONL reading and writing, and the check that every answer is exact."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from examples.support_tickets.generate import QUESTION, generate


def make_ticket_items(
    folder: Path, n: int = 40, tickets: int = 300, seed0: int = 0
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """`n` ticket logs written as `folder/tickets-{i:03d}.txt` (seeds seed0, seed0 + 1, ...), the batch
    items asking the tickets question of each, and the gold answers by item id."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    items: list[dict[str, Any]] = []
    gold: dict[str, int] = {}
    for i in range(n):
        text, answer, _ = generate(seed=seed0 + i, n=tickets)
        path = folder / f"tickets-{i:03d}.txt"
        path.write_text(text, encoding="utf-8")
        item_id = f"t{i:03d}"
        items.append({"id": item_id, "question": QUESTION, "context": str(path)})
        gold[item_id] = int(answer)
    return items, gold


def write_jsonl(path: str | os.PathLike[str], rows: Iterable[Any]) -> None:
    """One JSON value a line."""
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    Path(path).write_text(text, encoding="utf-8")


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every non-blank line of `path` parsed as JSON (a line that is not JSON raises)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def answers_exact(results: list[dict[str, Any]], gold: dict[str, int]) -> list[str]:
    """Ids (as strings) of `results` whose answer (an int, or its text) is not the gold answer of that
    id; an id without a gold answer counts as wrong. Ids of `gold` missing from `results` are not
    checked here."""
    return [
        str(result.get("id"))
        for result in results
        if not _same(result.get("answer"), gold.get(str(result.get("id"))))
    ]


def _same(answer: Any, expected: int | None) -> bool:
    if expected is None or isinstance(answer, bool) or answer is None:
        return False
    if isinstance(answer, int):
        return answer == expected
    if isinstance(answer, float):
        return answer.is_integer() and int(answer) == expected
    if isinstance(answer, str):
        return answer.strip() == str(expected)
    return False
