"""The receipts vision family: exact gold from the construction, and its oracle scoring 1.0 through a
whole run (a check of the plumbing: the oracle reads the ground truth of the bytes it is sent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlmx import RLM
from rlmx.cli import main
from rlmx.context import Context
from rlmx.errors import ConfigError
from rlmx.evals import EvalConfig, load_records
from rlmx.evals.items import EvalItem
from rlmx.evals.receipts import Receipts, receipts_oracle, render, write_images
from rlmx.evals.registry import FAMILIES, IMAGE_FAMILIES, generate_item
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


def test_rlmx_eval_runs_the_receipts_family_with_its_oracle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "res"
    args = ["eval", "--oracle", "--suite", "receipts", "--sizes", "8k", "--n", "2", "--baselines", "none"]
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--out", str(out), "-q"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == str(out / "report.md")
    records = load_records(out)
    assert [r["method"] for r in records] == ["rlm", "rlm"]
    assert all(r["score"] == 1.0 and r["family"] == "receipts" for r in records)
    assert {r["item_id"] for r in records} == {"receipts-png-8K-s0-000", "receipts-png-8K-s0-001"}
    pictures = sorted((out / "images" / "receipts-png-8K-s0-000").glob("*.png"))
    assert len(pictures) == 8 and pictures[0].read_bytes().startswith(b"\x89PNG")
    assert "receipts" in (out / "report.md").read_text(encoding="utf-8")
    trace = (out / "traces" / "receipts-png-8K-s0-000.jsonl").read_text(encoding="utf-8")
    assert "oracle:receipts-reader" in trace  # the answers came from vision sub-calls
    with pytest.raises(SystemExit) as exit_info:  # a resumed run finds every item done
        main([*args, "--out", str(out), "-q"])
    assert exit_info.value.code == 0 and len(load_records(out)) == 2


def test_a_text_baseline_with_the_receipts_family_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "--oracle", "--suite", "receipts", "--baselines", "bm25", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err
    assert "--suite receipts has image contexts" in err and "--baselines bm25" in err
    assert not (tmp_path / "o").exists()
    with pytest.raises(
        ConfigError,
        match=r"family receipts has image contexts, which the baselines direct cannot read: give `methods`",
    ):
        EvalConfig(
            suite=("niah", "receipts"),
            sizes=(8_192,),
            out=tmp_path / "p",
            methods=("rlm", "direct"),
            oracle=True,
        )


def test_all_runs_the_text_families_only() -> None:
    assert "receipts" not in FAMILIES and "receipts" in IMAGE_FAMILIES
    assert generate_item("receipts", 16_384, 0).key["truth"].__len__() == 16
