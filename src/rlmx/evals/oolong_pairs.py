"""OOLONG-Pairs-style questions over the OOLONG contexts: which pairs of users satisfy label (and date)
conditions. Gold by brute force over all pairs; scored by F1 over pairs.

Ambiguity, resolved one way: a condition about "all of a user's instances of label X" is false for a
user with no instance of X (no vacuous truth); likewise "no instance of X after D" needs at least one
instance of X. Every condition therefore requires the user to have at least one matching instance.
"""

from __future__ import annotations

import datetime as dt
import inspect
from typing import Any, ClassVar

from rlmx.evals import oolong_data as data
from rlmx.evals.items import EvalItem, Noise, Score, item_id, repl, rng_for
from rlmx.evals.oolong import TRIES_PER_TYPE, labelled
from rlmx.evals.scoring import parse_pairs, set_f1

PAIR_TYPES = ("both_have", "one_each", "both_after", "both_without", "both_all_before", "same_count")
FORMAT = "List every pair once as (smaller ID, larger ID), one pair per line."


def pairs_answer(records: list[Any], spec: dict[str, Any]) -> list[list[int]]:
    """All qualifying user pairs from (ISO date, user, label) records, sorted. Self-contained: a scripted
    root pastes it into the REPL, and the generator computes the gold with it."""
    kind, a, b, date = spec["type"], spec["label"], spec.get("label_b"), spec.get("date")
    by_user: dict[int, list[Any]] = {}
    for day, user, label in records:
        by_user.setdefault(user, []).append((day, label))

    def has(rows: list[Any], lab: Any) -> bool:
        return any(r[1] == lab for r in rows)

    def qualifies(rows: list[Any]) -> bool:
        if kind == "both_have":
            return has(rows, a)
        if kind == "both_after":
            return any(r[1] == a and r[0] > date for r in rows)
        if kind == "both_without":
            return has(rows, a) and not has(rows, b)
        if kind == "both_all_before":  # needs at least one instance of a: no vacuous truth
            return has(rows, a) and all(r[0] < date for r in rows if r[1] == a)
        raise ValueError(f"unknown pair question type {kind!r}")

    users = sorted(by_user)
    out = []
    for i, u in enumerate(users):
        for v in users[i + 1 :]:
            ru, rv = by_user[u], by_user[v]
            if kind == "one_each":
                ok = (has(ru, a) and has(rv, b)) or (has(ru, b) and has(rv, a))
            elif kind == "same_count":
                cu, cv = sum(r[1] == a for r in ru), sum(r[1] == a for r in rv)
                ok = cu == cv and cu > 0
            else:
                ok = qualifies(ru) and qualifies(rv)
            if ok:
                out.append([u, v])
    return out


def question_text(spec: dict[str, Any]) -> str:
    a, b = spec["label"], spec.get("label_b")
    date = dt.date.fromisoformat(spec["date"]).strftime("%B %d, %Y") if spec.get("date") else ""
    text = {
        "both_have": f"Which pairs of users both have at least one instance of the category '{a}'?",
        "one_each": f"Which pairs of users are such that one has an instance of the category '{a}' and the "
        f"other has an instance of the category '{b}'?",
        "both_after": f"Which pairs of users both have an instance of the category '{a}' dated after {date}?",
        "both_without": f"Which pairs of users both have an instance of the category '{a}' and no instance "
        f"of the category '{b}'?",
        "both_all_before": f"Which pairs of users both have instances of the category '{a}', all of them "
        f"dated before {date}?",
        "same_count": f"Which pairs of users have the same number of instances of the category '{a}' "
        "(at least one each)?",
    }[spec["type"]]
    return f"{text} {FORMAT}"


def pick_pairs_question(index: int, rng: Any, rows: list[Any]) -> tuple[dict[str, Any], list[list[int]]]:
    """The question of item `index`: its type cycles with the index; a question with no qualifying pair,
    or with every pair qualifying, is drawn again (other labels and date) before the next type is tried."""
    users = len({r[1] for r in rows})
    for shift in range(len(PAIR_TYPES)):
        kind = PAIR_TYPES[(index + shift) % len(PAIR_TYPES)]
        for _ in range(TRIES_PER_TYPE):
            a, b = rng.sample(list(data.LABELS), 2)
            day = data.FIRST_DAY + dt.timedelta(days=rng.randrange(400, data.DAYS - 400))
            spec = {"type": kind, "label": a, "label_b": b, "date": day.isoformat()}
            gold = pairs_answer(rows, spec)
            if 0 < len(gold) < users * (users - 1) // 2:
                return spec, gold
    return spec, gold


class OolongPairs:
    name = "oolong_pairs"
    description = "OOLONG-Pairs: which pairs of users meet conditions on their instances (quadratic)"
    variants = data.VARIANTS
    sources: ClassVar[dict[str, str]] = {
        "wordnet": "the OOLONG contexts (same generator and seeds as `oolong`), on WordNet glosses; "
        "fallback: the templated variant",
        "templated": "the OOLONG contexts (same generator and seeds as `oolong`), on templated definitions",
    }

    def built(self, variant: str) -> str:
        return data.built_variant(variant)

    def generate(self, size_tokens: int, index: int, seed: int, variant: str) -> EvalItem:
        ctx = data.build_context(size_tokens, seed, index, variant)
        rng = rng_for(self.name, size_tokens, seed, index)
        spec, gold = pick_pairs_question(index, rng, labelled(ctx.records))
        return EvalItem(
            family=self.name,
            variant=ctx.variant,
            id=item_id(self.name, ctx.variant, size_tokens, seed, index),
            size_tokens=size_tokens,
            question=question_text(spec),
            context=ctx.text,
            gold=gold,
            spec=spec,
            key={"labels": {r[2]: r[3] for r in ctx.records}, "records": ctx.records},
            source=ctx.source,
        )

    def score(self, answer: str, item: EvalItem) -> Score:
        gold = {(int(u), int(v)) for u, v in item.gold}
        return Score(set_f1(parse_pairs(answer), gold))

    def evidence(self, text: str, item: EvalItem) -> list[str]:
        return [m.group(0) for m in data.LINE.finditer(text)]

    def oracle_reply(self, prompt: str, item: EvalItem, noise: Noise) -> str:
        if data.LABEL_ASK in prompt:
            return data.label_reply(prompt, item.key["labels"], noise)
        pairs = pairs_answer(data.visible_records(prompt, item.key["labels"], noise), item.spec)
        return "\n".join(f"({u}, {v})" for u, v in pairs) or "No pairs."

    def root_turns(self, item: EvalItem) -> list[str]:
        return [
            repl("print(peek(0, 600))", "Let me look at the format first."),
            repl(data.labelling_code(item.question_line), "Label every instance with sub-calls."),
            repl(
                inspect.getsource(pairs_answer)
                + f"\npairs = pairs_answer(records, {item.spec!r})\n"
                + 'answer = "\\n".join(f"({u}, {v})" for u, v in pairs)\nprint(len(pairs), "pairs")',
                "Check every pair in code.",
            ),
            "FINAL_VAR(answer)",
        ]


def simulated_score(family: Any, item: EvalItem, p: float, draws: int, seed: int = 0) -> tuple[float, float]:
    """Mean and variance of the score when each label is flipped with probability p, by simulation:
    the records are relabelled as a noisy oracle would, the answer recomputed and scored."""
    scores = []
    for draw in range(draws):
        noise = Noise(p, seed=hash((seed, draw)) & 0xFFFF_FFFF)
        text = "\n".join(data.render_line(r) for r in item.key["records"])
        scores.append(family.score(family.oracle_reply(text, item, noise), item).value)
    mean = sum(scores) / len(scores)
    return mean, sum((s - mean) ** 2 for s in scores) / max(1, len(scores) - 1)
