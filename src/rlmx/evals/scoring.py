"""Scoring primitives shared by the families: RULER containment, OOLONG's numeric and exact rules,
SQuAD-style exact match and F1, F1 over pairs, and LongBench's answer-letter extraction."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
ANSWER_PREFIX = re.compile(r"(?:final\s+)?answer\s*(?:is)?\s*[:：]", re.IGNORECASE)
PAIR = re.compile(r"[(\[]\s*(\d+)\s*,\s*(\d+)\s*[)\]]")
ARTICLES = re.compile(r"\b(a|an|the)\b")
MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], 1)}  # fmt: skip
COMPARISONS = ("more common than", "less common than", "same frequency as")


def after_answer_prefix(text: str) -> str:
    """The text after the last 'Answer:' (OOLONG's models answer as 'Answer: ...'); all of it otherwise."""
    parts = ANSWER_PREFIX.split(text)
    return parts[-1] if len(parts) > 1 else text


def basic_normalize(text: str) -> str:
    """Lower case, no surrounding quotes/brackets/backticks/punctuation, single spaces."""
    text = after_answer_prefix(str(text)).strip().lower()
    text = re.sub(r"\s+", " ", text)
    return text.strip(" \t\n'\"`*.,;:!?()[]{}")


def squad_normalize(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = str(text).lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    return " ".join(ARTICLES.sub(" ", text).split())


def ruler_contains(answer: str, gold: str) -> float:
    """RULER's score: 1 when the gold value appears anywhere in the answer, case-insensitively."""
    return 1.0 if str(gold).lower() in str(answer).lower() else 0.0


def strict_match(answer: str, gold: str) -> float:
    """1 when the answer is the gold value and nothing else (after basic normalisation)."""
    return 1.0 if basic_normalize(answer) == basic_normalize(gold) else 0.0


def parse_number(answer: str) -> float | None:
    """The number an answer gives: the whole answer if it is one; else the first number after the last
    'Answer:'; else the last number in the text (thousands separators allowed)."""
    text = str(answer).strip()
    tail = after_answer_prefix(text)
    pool = NUMBER.findall(tail) if tail is not text else []
    if not pool:
        pool = NUMBER.findall(text)[-1:]
    if not pool:
        return None
    try:
        return float(pool[0].replace(",", ""))
    except ValueError:
        return None


def numeric_score(answer: str, gold: float) -> float:
    """OOLONG's numeric score: 0.75 ** |error|; 0 when no number can be read."""
    value = parse_number(answer)
    return 0.0 if value is None else 0.75 ** abs(value - float(gold))


def choice_match(answer: str, gold: str, choices: Iterable[str]) -> float:
    """Exact match against one of a closed set of answers (labels, comparison phrases).

    The normalised answer must equal the gold; failing that, the answer is accepted when exactly one
    of the choices occurs in it as a whole phrase and it is the gold.
    """
    norm = basic_normalize(answer)
    gold_norm = basic_normalize(gold)
    if norm == gold_norm:
        return 1.0
    found = [c for c in choices if re.search(rf"(?<![\w.]){re.escape(basic_normalize(c))}(?![\w.])", norm)]
    return 1.0 if len(found) == 1 and basic_normalize(found[0]) == gold_norm else 0.0


def parse_year_month(answer: str) -> tuple[int, int | None] | None:
    """A date answer as (year, month or None): 'March 2021', '2021-03', '03/2021' or '2021'."""
    text = basic_normalize(answer)
    match = re.search(r"\b(\d{4})-(\d{1,2})\b", text) or re.search(r"\b(\d{1,2})/(\d{4})\b", text)
    if match:
        a, b = int(match.group(1)), int(match.group(2))
        return (a, b) if a > 999 else (b, a)
    for name, number in MONTHS.items():
        found = re.search(rf"\b({name}|{name[:3]})\.?\s+(\d{{4}})\b", text)
        if found:
            return int(found.group(2)), number
    years = re.findall(r"\b(1\d{3}|2\d{3})\b", text)
    return (int(years[-1]), None) if years else None


def date_match(answer: str, gold: str) -> float:
    """Exact match of the parsed year (and month, when the gold has one)."""
    got, want = parse_year_month(answer), parse_year_month(gold)
    return 1.0 if got is not None and want is not None and got == want else 0.0


def token_f1(answer: str, gold: str) -> float:
    """SQuAD token F1 between the normalised answer and gold."""
    pred, ref = squad_normalize(answer).split(), squad_normalize(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def exact_match(answer: str, gold: str) -> float:
    return 1.0 if squad_normalize(answer) == squad_normalize(gold) else 0.0


def parse_pairs(answer: str) -> set[tuple[int, int]]:
    """Every '(a, b)' or '[a, b]' in the answer, as unordered pairs (smaller id first); self-pairs dropped."""
    pairs = {tuple(sorted((int(a), int(b)))) for a, b in PAIR.findall(str(answer))}
    return {(a, b) for a, b in pairs if a != b}


def set_f1(predicted: set[tuple[int, int]], gold: set[tuple[int, int]]) -> float:
    """F1 over sets; two empty sets agree perfectly (1.0)."""
    if not predicted and not gold:
        return 1.0
    hits = len(predicted & gold)
    if hits == 0:
        return 0.0
    precision, recall = hits / len(predicted), hits / len(gold)
    return 2 * precision * recall / (precision + recall)


LONGBENCH_PATTERNS = (
    re.compile(r"The correct answer is \(([A-D])\)"),
    re.compile(r"The correct answer is ([A-D])"),
)


def extract_choice(answer: str) -> str | None:
    """The answer letter as LongBench v2 reads it ('The correct answer is (X)' or '... is X'), and, as
    a documented extension, an answer that is nothing but the letter ('B', '(B)', 'Answer: B')."""
    text = str(answer).replace("*", "")
    for pattern in LONGBENCH_PATTERNS:
        match = pattern.search(text)
        if match:
            return match.group(1)
    bare = re.fullmatch(r"\(?([A-D])\)?\.?", basic_normalize(text).upper())
    return bare.group(1) if bare else None
