"""The receipts vision family: exact gold from the construction, and its oracle scoring 1.0 through a
whole run (a check of the plumbing: the oracle reads the ground truth of the bytes it is sent)."""

from __future__ import annotations

from pathlib import Path

from rlmx import RLM
from rlmx.context import Context
from rlmx.evals.items import EvalItem
from rlmx.evals.receipts import Receipts, receipts_oracle, render, write_images
from rlmx.images.probe import probe
from rlmx.sandbox.base import SandboxSettings


def test_items_are_deterministic_with_exact_gold() -> None:
    family = Receipts()
    a, b = family.generate(24, 0, 0), family.generate(24, 0, 0)
    assert a.gold == b.gold and a.key == b.key and a.id == "receipts-png-24-s0-000"
    truth = a.key["truth"]
    receipts = [p for p in truth.values() if p["kind"] == "RECEIPT"]
    assert len(truth) == 24 and len(receipts) == 6
    over = sorted(p["id"] for p in receipts if p["total"] > 100)
    assert a.gold == {"ids": over, "sum": round(sum(p["total"] for p in receipts if p["total"] > 100), 2)}
    assert any(p["kind"] != "RECEIPT" and p["total"] > 100 for p in truth.values())  # distractors over 100
    assert family.generate(24, 1, 0).gold != a.gold
    info = probe(render(receipts[0]))
    assert info is not None and (info.format, info.width, info.height) == ("png", 360, 200)


def test_scoring() -> None:
    item = EvalItem("receipts", "png", "x", 6, "q", "", {"ids": ["R-1", "R-2"], "sum": 250.5})
    family = Receipts()
    assert family.score("IDS: R-2, R-1; SUM: 250.50", item).value == 1.0
    assert family.score("IDS: R-1; SUM: 250.50", item).metrics == {"ids": 0.0, "sum": 1.0}
    assert family.score("no idea", item).value == 0.0


def test_the_oracle_scores_one_through_a_whole_run(tmp_path: Path) -> None:
    family = Receipts()
    scores = []
    for index in range(3):
        item = family.generate(16, index, 0)
        folder = write_images(item, tmp_path / f"item{index}")
        root, reader = receipts_oracle(item)
        rlm = RLM(root, sub_model=reader, trace=False, sandbox=SandboxSettings("process-unisolated"))
        result = rlm.run(item.question, Context.from_paths([folder]))
        scores.append(family.score(str(result.answer), item).value)
    assert scores == [1.0, 1.0, 1.0]
