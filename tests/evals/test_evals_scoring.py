"""The scorers: RULER containment and strict match, OOLONG's numeric/exact rules, pair F1, SQuAD EM/F1
and LongBench's answer-letter extraction."""

from __future__ import annotations

import pytest

from rlmx.evals.scoring import (
    COMPARISONS,
    choice_match,
    date_match,
    exact_match,
    extract_choice,
    numeric_score,
    parse_number,
    parse_pairs,
    ruler_contains,
    set_f1,
    strict_match,
    token_f1,
)


def test_ruler_is_case_insensitive_containment_and_strict_is_the_value_alone() -> None:
    gold = "3f2a-BEEF"
    assert ruler_contains("The magic uuid is 3F2A-beef.", gold) == 1.0
    assert ruler_contains("it is 3f2a-bee", gold) == 0.0
    assert strict_match("  '3F2A-beef'. ", gold) == 1.0
    assert strict_match("Answer: 3f2a-beef", gold) == 1.0
    assert strict_match("The magic uuid is 3F2A-beef.", gold) == 0.0
    assert strict_match("3f2a-beef, 1234567", gold) == 0.0  # listing every candidate is not strict


@pytest.mark.parametrize(
    ("answer", "value"),
    [
        ("42", 42.0),
        ("1,204", 1204.0),
        ("Answer: 17 instances (out of 300)", 17.0),
        ("Of the 300 lines, the count is 17", 17.0),  # the last number when there is no 'Answer:'
        ("no idea", None),
    ],
)
def test_parse_number(answer: str, value: float | None) -> None:
    assert parse_number(answer) == value


def test_numeric_score_is_three_quarters_to_the_error() -> None:
    assert numeric_score("10", 10) == 1.0
    assert numeric_score("12", 10) == pytest.approx(0.75**2)
    assert numeric_score("7", 10) == pytest.approx(0.75**3)
    assert numeric_score("none", 10) == 0.0


def test_choice_match_exact_or_the_only_choice_named() -> None:
    labels = ("animal", "food", "plant")
    assert choice_match("Food.", "food", labels) == 1.0
    assert choice_match("Answer: the most common category is food", "food", labels) == 1.0
    assert choice_match("food or plant", "food", labels) == 0.0  # two choices named: not an answer
    assert choice_match("seafood", "food", labels) == 0.0  # whole words only
    assert choice_match("animal is less common than plant", "less common than", COMPARISONS) == 1.0
    assert choice_match("more common than", "less common than", COMPARISONS) == 0.0


def test_date_match_compares_year_and_month_when_the_gold_has_one() -> None:
    assert date_match("2021", "2021") == 1.0
    assert date_match("It peaked in 2021.", "2021") == 1.0
    assert date_match("2020", "2021") == 0.0
    assert date_match("March 2021", "2021-03") == 1.0
    assert date_match("Mar 2021", "March 2021") == 1.0
    assert date_match("April 2021", "March 2021") == 0.0


def test_pairs_are_unordered_and_f1_scored() -> None:
    got = parse_pairs("(3, 1)\n[2, 5]\n(4, 4)\n(1, 3)")
    assert got == {(1, 3), (2, 5)}  # order inside a pair ignored, duplicates and self-pairs dropped
    gold = {(1, 3), (2, 5), (6, 7), (8, 9)}
    assert set_f1(got, gold) == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert set_f1(set(), set()) == 1.0
    assert set_f1({(1, 2)}, set()) == 0.0


def test_squad_exact_match_and_f1() -> None:
    assert exact_match("The Eiffel Tower!", "eiffel tower") == 1.0
    assert exact_match("Eiffel", "eiffel tower") == 0.0
    assert token_f1("Eiffel", "eiffel tower") == pytest.approx(2 * 1 * 0.5 / 1.5)
    assert token_f1("", "x") == 0.0


@pytest.mark.parametrize(
    ("answer", "letter"),
    [
        ("Reasoning... The correct answer is (C)", "C"),
        ("The correct answer is B.", "B"),
        ("**The correct answer is (D)**", "D"),
        ("(A)", "A"),
        ("Answer: b", "B"),
        ("I think it could be A or B", None),
        ("", None),
    ],
)
def test_extract_choice_as_longbench(answer: str, letter: str | None) -> None:
    assert extract_choice(answer) == letter
