"""Validation without a capable model: an oracle sub-model with scripted root programs scores 1.0 on
every family at 8K and 128K tokens, and a noisy oracle scores what the scorer's formula predicts."""

from __future__ import annotations

import math
import statistics

import pytest

from rlmx import RLM, Limits
from rlmx.answer import answer_text
from rlmx.evals.items import EvalItem, Noise
from rlmx.evals.oolong import NUMERIC, expected_numeric_score
from rlmx.evals.oolong_pairs import simulated_score
from rlmx.evals.oracle import Oracle
from rlmx.evals.registry import FAMILIES, generate_item

VARIANTS = [(name, v) for name, fam in FAMILIES.items() for v in fam.variants]


def run_oracle(item: EvalItem, noise: Noise | None = None) -> tuple[float, dict]:
    root, reader = Oracle([item], noise=noise).models_for(item)
    rlm = RLM(root, sub_model=reader, trace=False, limits=Limits(max_llm_calls=2_000, max_iterations=8))
    result = rlm.run(item.question, item.context)
    assert result.stopped_by == "final", (item.id, result.error)
    answer = answer_text(result.answer) if result.answer is not None else ""
    return FAMILIES[item.family].score(answer, item).value, result.usage


def _sub_calls(usage: dict) -> int:
    depth = usage["by_depth"]
    return (depth.get("1") or depth.get(1) or {"calls": 0})["calls"]


@pytest.mark.parametrize("size", [8_192, 131_072])
@pytest.mark.parametrize(("name", "variant"), VARIANTS)
def test_oracle_scores_one_on_every_family(name: str, variant: str, size: int) -> None:
    for index in range(2):
        item = generate_item(name, size, index, variant=variant)
        score, usage = run_oracle(item)
        assert score == 1.0, item.id
        assert _sub_calls(usage) >= 1  # the answer went through the oracle sub-model


def test_the_answer_comes_from_the_sub_calls() -> None:
    """At 128K the oolong program labels every line through sub-calls: thousands of lines, a few calls."""
    item = generate_item("oolong", 131_072, 0)
    score, usage = run_oracle(item)
    lines = len(item.key["records"])
    assert score == 1.0 and lines > 3_000
    assert _sub_calls(usage) == math.ceil(lines / 300)


def test_noisy_oracle_on_counting_questions_matches_the_binomial_prediction() -> None:
    p = 0.15
    items = [generate_item("oolong", 8_192, i) for i in range(48) if i % 8 in (0, 3, 5, 7)]
    assert all(item.spec["type"] in NUMERIC for item in items)
    observed, predicted, variance = [], [], []
    for item in items:
        score, _ = run_oracle(item, Noise(p, seed=7))
        mean, var = expected_numeric_score(item, p)
        observed.append(score)
        predicted.append(mean)
        variance.append(var)
    n = len(items)
    gap = abs(statistics.fmean(observed) - statistics.fmean(predicted))
    stderr = math.sqrt(sum(variance)) / n
    assert statistics.fmean(predicted) < 0.9  # the noise matters: this is not a trivial agreement
    assert gap <= 3 * stderr, (statistics.fmean(observed), statistics.fmean(predicted), stderr)


def test_the_binomial_prediction_agrees_with_simulation() -> None:
    fam = FAMILIES["oolong"]
    item = generate_item("oolong", 8_192, 3)
    mean, var = expected_numeric_score(item, 0.2)
    sim_mean, sim_var = simulated_score(fam, item, 0.2, draws=400)
    assert abs(mean - sim_mean) <= 4 * math.sqrt(var / 400)
    assert sim_var == pytest.approx(var, rel=0.35)


def test_noisy_oracle_on_pairs_matches_simulation() -> None:
    p = 0.1
    fam = FAMILIES["oolong_pairs"]
    observed, predicted, variance = [], [], []
    for index in range(12):
        item = generate_item("oolong_pairs", 8_192, index)
        score, _ = run_oracle(item, Noise(p, seed=11))
        mean, var = simulated_score(fam, item, p, draws=40, seed=5)
        observed.append(score)
        predicted.append(mean)
        variance.append(var)
    stderr = math.sqrt(sum(variance)) / len(observed)
    assert statistics.fmean(predicted) < 0.95
    assert abs(statistics.fmean(observed) - statistics.fmean(predicted)) <= 3 * stderr + 0.02


@pytest.mark.parametrize(("name", "variant", "decision"), [
    ("niah", "noise", ("niah",)),
    ("doc_multihop", "synthetic", ("answer",)),
    ("codeqa", "synthetic", ("choice",)),
])  # fmt: skip
def test_noisy_oracle_answers_are_wrong_exactly_when_the_noise_says(
    name: str, variant: str, decision: tuple[str, ...]
) -> None:
    """Each item's score is 1 - [its answer was flipped]; the mean is 1 - p within sampling error."""
    p, noise = 0.3, Noise(0.3, seed=3)
    scores = []
    for index in range(20):
        item = generate_item(name, 8_192, index, variant=variant)
        score, _ = run_oracle(item, noise)
        assert score == (0.0 if noise.flips(item.id, *decision) else 1.0), item.id
        scores.append(score)
    assert abs(statistics.fmean(scores) - (1 - p)) <= 3 * math.sqrt(p * (1 - p) / len(scores))
