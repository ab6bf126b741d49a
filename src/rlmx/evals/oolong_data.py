"""The OOLONG-style context shared by `oolong` and `oolong_pairs`: dated, user-attributed instances
(WordNet glosses, or templated definitions) whose category must be read, never stated; plus the
labelling sub-call both use."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from functools import cache

from rlmx.evals import sources
from rlmx.evals.items import BATCHED, Noise, rng_for

LABELS = tuple(sorted(sources.LEXNAMES.values()))
LINE = re.compile(r"^Date: (\w{3} \d{2}, \d{4}) \|\| User: (\d+) \|\| Instance: (.*)$", re.MULTILINE)
FIRST_DAY, DAYS = dt.date(2018, 1, 1), 7 * 365
LABEL_ASK = "Label each instance below with one of these categories"
Record = tuple[str, int, str, str]  # (ISO date, user id, instance text, label)


VARIANTS = ("wordnet", "templated")


@dataclass(frozen=True)
class OolongContext:
    text: str
    records: list[Record]
    users: list[int]
    source: str
    variant: str  # the text actually used: "wordnet", or "templated" (asked for, or WordNet is absent)


@cache
def _glosses(variant: str = "wordnet") -> tuple[dict[str, list[str]], str]:
    """Glosses per label, without any gloss that occurs under two labels (its label would be ambiguous)."""
    glosses = sources.templated_glosses() if variant == "templated" else sources.wordnet_glosses()
    seen: dict[str, int] = {}
    for items in glosses.by_label.values():
        for text in items:
            seen[text] = seen.get(text, 0) + 1
    clean = {label: [t for t in items if seen[t] == 1] for label, items in glosses.by_label.items()}
    return clean, glosses.source


def header(n_lines: int) -> str:
    return (
        f"The following lines contain {n_lines:,} dictionary definitions, one per line. Each line has a "
        "date, a user ID and an instance (a definition of an English noun, without the noun). Each "
        f"instance belongs to exactly one of {len(LABELS)} categories: {', '.join(LABELS)}. The category "
        "is not given: it has to be inferred from the definition.\n"
    )


def footer(n_lines: int) -> str:
    return f"\nEnd of the {n_lines:,} lines. Answer the question about them."


def render_line(record: Record) -> str:
    day = dt.date.fromisoformat(record[0])
    return f"Date: {day:%b %d, %Y} || User: {record[1]} || Instance: {record[2]}"


def built_variant(variant: str) -> str:
    """The text a context asked as `variant` is built from: "wordnet", or "templated" (asked for, or
    WordNet is absent)."""
    return "templated" if _glosses(variant)[1] == sources.TEMPLATED_SOURCE else "wordnet"


def build_context(size_tokens: int, seed: int, index: int, variant: str = "wordnet") -> OolongContext:
    """A context of about `size_tokens` tokens; the same (size, seed, index) always gives the same one on
    the same text source. `variant` "wordnet" falls back to the templated text when WordNet is absent."""
    rng = rng_for("oolong-context", size_tokens, seed, index)
    glosses, source = _glosses(variant)
    used = built_variant(variant)
    target_chars = size_tokens * 4
    est_lines = max(20, target_chars // 130)
    n_users = max(8, min(200, est_lines // 40))
    users = sorted(rng.sample(range(10_000, 99_999), n_users))
    heavy = users[: max(1, n_users // 5)]  # 20% of the users write 80% of the lines
    light = users[len(heavy) :] or heavy
    weights = {label: rng.uniform(0.4, 2.0) for label in LABELS}
    user_bias = {u: rng.choice(LABELS) for u in users}
    records: list[Record] = []
    chars = len(header(est_lines * 2)) + len(footer(est_lines * 2))
    while chars < target_chars:
        user = rng.choice(heavy) if rng.random() < 0.8 else rng.choice(light)
        pool = dict(weights)
        pool[user_bias[user]] *= 2.5
        label = rng.choices(list(pool), weights=list(pool.values()))[0]
        instance = rng.choice(glosses[label])
        day = FIRST_DAY + dt.timedelta(days=rng.randrange(DAYS))
        record = (day.isoformat(), user, instance, label)
        records.append(record)
        chars += len(render_line(record)) + 1
    body = "\n".join(render_line(r) for r in records)
    text = header(len(records)) + body + footer(len(records))
    return OolongContext(text, records, users, source, used)


def parse_lines(text: str) -> list[tuple[str, int, str]]:
    """(ISO date, user, instance) of every data line in a text (a whole context or a visible part)."""
    out = []
    for match in LINE.finditer(text):
        day = dt.datetime.strptime(match.group(1), "%b %d, %Y").date()
        out.append((day.isoformat(), int(match.group(2)), match.group(3)))
    return out


def oracle_label(instance: str, line_key: str, labels: dict[str, str], noise: Noise) -> str:
    """The oracle's label for an instance: the true one, flipped to a random other label with prob. p."""
    truth = labels.get(instance, LABELS[0])
    if noise.flips("label", line_key):
        return noise.pick([lab for lab in LABELS if lab != truth], "label-to", line_key)
    return truth


def visible_records(text: str, labels: dict[str, str], noise: Noise) -> list[tuple[str, int, str]]:
    """The (date, user, label) records a perfect reader gets from the lines it can see."""
    return [
        (day, user, oracle_label(inst, f"{day}|{user}|{inst}", labels, noise))
        for day, user, inst in parse_lines(text)
    ]


def label_reply(prompt: str, labels: dict[str, str], noise: Noise) -> str:
    """The oracle's answer to the scripted root's labelling sub-call: '<n>: <label>' per numbered line."""
    out = []
    for number, line in re.findall(r"^(\d+)\. (Date: .*)$", prompt, re.MULTILINE):
        parsed = parse_lines(line)
        if parsed:
            day, user, inst = parsed[0]
            out.append(f"{number}: {oracle_label(inst, f'{day}|{user}|{inst}', labels, noise)}")
    return "\n".join(out)


def labelling_code(question_line: str, lines_per_call: int = 300) -> str:
    """REPL code a sound RLM writes: label every line with sub-calls, keep (date, user, label) records."""
    head = f"Question: {question_line}\n{LABEL_ASK}: {', '.join(LABELS)}.\nReply with one line per instance, '<number>: <category>'.\n\n"
    return f"""
import re, datetime
{BATCHED}
lines = [l for l in context.split("\\n") if l.startswith("Date: ")]
batches = [lines[i:i + {lines_per_call}] for i in range(0, len(lines), {lines_per_call})]
head = {head!r}
replies = batched([head + "\\n".join(f"{{j + 1}}. {{l}}" for j, l in enumerate(b)) for b in batches])
records = []
for batch, reply in zip(batches, replies):
    got = dict(re.findall(r"^(\\d+): *(\\w+)", reply, re.M))
    for j, line in enumerate(batch):
        m = re.match(r"Date: (.+?) \\|\\| User: (\\d+) \\|\\|", line)
        day = datetime.datetime.strptime(m.group(1), "%b %d, %Y").date().isoformat()
        records.append((day, int(m.group(2)), got.get(str(j + 1), "?")))
print(len(lines), "lines,", len(batches), "sub-calls,", sum(r[2] == "?" for r in records), "unlabelled")
"""
