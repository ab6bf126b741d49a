"""OOLONG-style aggregation: counting, per-user and timeline questions over instances whose category
has to be read. Numeric answers score 0.75 ** |error|; labels, comparisons and years score exactly."""

from __future__ import annotations

import datetime as dt
import inspect
import math
from typing import Any, ClassVar

from rlmx.evals import oolong_data as data
from rlmx.evals.items import EvalItem, Noise, Score, item_id, repl, rng_for
from rlmx.evals.scoring import COMPARISONS, choice_match, date_match, numeric_score

QUESTION_TYPES = (
    "count", "most_common", "compare", "user_count", "user_most_common", "year_count", "peak_year", "after_count",
)  # fmt: skip
NUMERIC = {"count", "user_count", "year_count", "after_count"}
FORMATS = {
    "numeric": "Give the final answer as a number.",
    "label": "Give the final answer as one of the categories: " + ", ".join(data.LABELS) + ".",
    "comparison": "Answer with one of: 'more common than', 'less common than', 'same frequency as'.",
    "year": "Give the final answer as a year (YYYY).",
}


def oolong_answer(records: list[Any], spec: dict[str, Any]) -> Any:
    """The answer to an OOLONG question from (ISO date, user, label) records. Self-contained: a scripted
    root pastes this function into the REPL, and the generator computes the gold with it."""
    kind, label = spec["type"], spec.get("label")

    def count(rows: list[Any], lab: Any) -> int:
        return sum(1 for r in rows if r[2] == lab)

    def most_common(values: list[Any]) -> Any:
        counts: dict[Any, int] = {}
        for v in values:
            counts[v] = counts.get(v, 0) + 1
        if not counts:
            return "none"
        best = max(counts.values())
        tops = sorted(str(k) for k, v in counts.items() if v == best)
        return tops[0] if len(tops) == 1 else "tie: " + ", ".join(tops)

    if kind == "count":
        return count(records, label)
    if kind == "most_common":
        return most_common([r[2] for r in records])
    if kind == "compare":
        a, b = count(records, label), count(records, spec["label_b"])
        return "more common than" if a > b else "less common than" if a < b else "same frequency as"
    if kind == "user_count":
        return count([r for r in records if r[1] == spec["user"]], label)
    if kind == "user_most_common":
        return most_common([r[2] for r in records if r[1] == spec["user"]])
    if kind == "year_count":
        return count([r for r in records if r[0][:4] == str(spec["year"])], label)
    if kind == "peak_year":
        return most_common([r[0][:4] for r in records if r[2] == label])
    if kind == "after_count":
        return count([r for r in records if r[0] > spec["date"]], label)
    raise ValueError(f"unknown OOLONG question type {kind!r}")


def answer_kind(spec: dict[str, Any]) -> str:
    kind = spec["type"]
    if kind in NUMERIC:
        return "numeric"
    return {"compare": "comparison", "peak_year": "year"}.get(kind, "label")


def question_text(spec: dict[str, Any]) -> str:
    kind, label = spec["type"], spec.get("label")
    text = {
        "count": f"How many instances belong to the category '{label}'?",
        "most_common": "Which category do the most instances belong to?",
        "compare": f"Is the category '{label}' more common than, less common than, or the same frequency as "
        f"the category '{spec.get('label_b')}'?",
        "user_count": f"How many instances from user {spec.get('user')} belong to the category '{label}'?",
        "user_most_common": f"Which category do the most instances from user {spec.get('user')} belong to?",
        "year_count": f"How many instances dated in {spec.get('year')} belong to the category '{label}'?",
        "peak_year": f"In which year were there the most instances of the category '{label}'?",
        "after_count": f"How many instances dated after {_pretty(spec.get('date'))} belong to the category '{label}'?",
    }[kind]
    return f"{text} {FORMATS[answer_kind(spec)]}"


def _pretty(iso: Any) -> str:
    return dt.date.fromisoformat(str(iso)).strftime("%B %d, %Y") if iso else ""


def make_spec(kind: str, rng: Any, users: list[int], records: list[data.Record]) -> dict[str, Any]:
    label, other = rng.sample(list(data.LABELS), 2)
    busy = sorted({r[1] for r in records})
    spec: dict[str, Any] = {"type": kind, "label": label}
    if kind == "compare":
        spec["label_b"] = other
    if kind.startswith("user"):
        spec["user"] = rng.choice(busy)
    if kind == "year_count":
        spec["year"] = rng.randint(2018, 2024)
    if kind == "after_count":
        spec["date"] = (data.FIRST_DAY + dt.timedelta(days=rng.randrange(365, data.DAYS - 365))).isoformat()
    return spec


def labelled(records: list[data.Record]) -> list[tuple[str, int, str]]:
    return [(day, user, label) for day, user, _, label in records]


TRIES_PER_TYPE = 8


def pick_question(
    index: int, rng: Any, users: list[int], records: list[data.Record]
) -> tuple[dict[str, Any], Any]:
    """The question of item `index`: its type cycles with the index; a question whose gold would be a tie
    is drawn again (another label, user, year or date), and only when every draw ties does the next
    type take its place. So every type turns up on any text source, not only on the one it was tuned on."""
    rows = labelled(records)
    for shift in range(len(QUESTION_TYPES)):
        kind = QUESTION_TYPES[(index + shift) % len(QUESTION_TYPES)]
        for _ in range(TRIES_PER_TYPE):
            spec = make_spec(kind, rng, users, records)
            gold = oolong_answer(rows, spec)
            if not str(gold).startswith(("tie", "none")):
                return spec, gold
    return spec, gold  # every question ties: keep the last one (a context this small is not a test)


class Oolong:
    name = "oolong"
    description = "OOLONG-style aggregation: count, compare and date instances whose category must be read"
    variants = data.VARIANTS
    sources: ClassVar[dict[str, str]] = {
        "wordnet": "WordNet glosses labelled by lexicographer category ("
        + data.sources.WORDNET_LICENCE
        + "); fallback: the templated variant",
        "templated": data.sources.TEMPLATED_SOURCE,
    }

    def built(self, variant: str) -> str:
        return data.built_variant(variant)

    def generate(self, size_tokens: int, index: int, seed: int, variant: str) -> EvalItem:
        ctx = data.build_context(size_tokens, seed, index, variant)
        rng = rng_for(self.name, size_tokens, seed, index)
        spec, gold = pick_question(index, rng, ctx.users, ctx.records)
        return EvalItem(
            family=self.name,
            variant=ctx.variant,
            id=item_id(self.name, ctx.variant, size_tokens, seed, index),
            size_tokens=size_tokens,
            question=question_text(spec),
            context=ctx.text,
            gold=gold,
            spec={**spec, "answer_kind": answer_kind(spec)},
            key={"labels": {r[2]: r[3] for r in ctx.records}, "records": ctx.records},
            source=ctx.source,
        )

    def score(self, answer: str, item: EvalItem) -> Score:
        return Score(score_value(answer, item.gold, item.spec["answer_kind"]))

    def evidence(self, text: str, item: EvalItem) -> list[str]:
        spec = item.spec
        keep = []
        for line in data.LINE.finditer(text):
            day, user, _ = data.parse_lines(line.group(0))[0]
            if spec["type"].startswith("user") and user != spec["user"]:
                continue
            if spec["type"] == "year_count" and day[:4] != str(spec["year"]):
                continue
            if spec["type"] == "after_count" and day <= spec["date"]:
                continue
            keep.append(line.group(0))
        return keep

    def oracle_reply(self, prompt: str, item: EvalItem, noise: Noise) -> str:
        if data.LABEL_ASK in prompt:
            return data.label_reply(prompt, item.key["labels"], noise)
        records = data.visible_records(prompt, item.key["labels"], noise)
        return f"Answer: {oolong_answer(records, item.spec)}"

    def root_turns(self, item: EvalItem) -> list[str]:
        spec = {k: v for k, v in item.spec.items() if k != "answer_kind"}
        return [
            repl("print(peek(0, 600))", "Let me look at the format first."),
            repl(data.labelling_code(item.question_line), "Label every instance with sub-calls."),
            repl(
                inspect.getsource(oolong_answer)
                + f"\nanswer = oolong_answer(records, {spec!r})\nprint(answer)",
                "Aggregate in code.",
            ),
            "FINAL_VAR(answer)",
        ]


def score_value(answer: str, gold: Any, kind: str) -> float:
    if kind == "numeric":
        return numeric_score(answer, float(gold))
    if kind == "comparison":
        return choice_match(answer, str(gold), COMPARISONS)
    if kind == "year":
        return date_match(answer, str(gold))
    return choice_match(answer, str(gold), data.LABELS)


def expected_numeric_score(item: EvalItem, p: float) -> tuple[float, float]:
    """Mean and variance of the score of a counting question when every label is flipped to a uniformly
    chosen other label with probability p: the count read is Bin(k, 1-p) + Bin(n-k, p/(K-1))."""
    spec = item.spec
    if spec["type"] not in NUMERIC:
        raise ValueError("expected_numeric_score is defined for counting questions only")
    subset = [
        r for r in labelled(item.key["records"]) if oolong_answer([(r[0], r[1], "x")], {**spec, "label": "x"})
    ]
    n, k = len(subset), sum(1 for r in subset if r[2] == spec["label"])
    q = p / (len(data.LABELS) - 1)
    kept, added = _binomial(k, 1 - p), _binomial(n - k, q)
    mean = second = 0.0
    for i, pi in enumerate(kept):
        for j, pj in enumerate(added):
            s = 0.75 ** abs(i + j - k)
            mean += pi * pj * s
            second += pi * pj * s * s
    return mean, second - mean * mean


def _binomial(n: int, p: float) -> list[float]:
    return [math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(n + 1)]
