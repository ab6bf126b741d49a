"""S-NIAH (RULER-style single needle): a magic number or UUID for a key, hidden at a swept depth in a
haystack of noise sentences or essays, with near-miss distractor needles."""

from __future__ import annotations

import re
import uuid
from typing import ClassVar

from rlmx.evals import sources
from rlmx.evals.items import BATCHED, EvalItem, Noise, Score, item_id, repl, rng_for
from rlmx.evals.scoring import ruler_contains, strict_match

NEEDLE = "One of the special magic {kind} for {key} is: {value}."
NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
ADJECTIVES = "amber brisk calm dusty eager fuzzy gentle hollow icy jolly keen lucky misty noble olive proud quiet rapid silent tidy".split()
NOUNS = "anchor badger candle dragon ember falcon garden harbor island jacket kettle lantern meadow needle orchard pebble quarry raven saddle thimble".split()
FIND = "Find the special magic"


def _key(rng) -> str:  # type: ignore[no-untyped-def]
    return f"{rng.choice(ADJECTIVES)}-{rng.choice(NOUNS)}"


def _near_misses(key: str) -> list[str]:
    """Keys a careless reader confuses with `key`: a plural, a swapped order, a one-letter change."""
    adj, noun = key.split("-")
    changed = noun[:-1] + ("x" if noun[-1] != "x" else "y")
    return [f"{adj}-{noun}s", f"{noun}-{adj}", f"{adj}-{changed}"]


class Niah:
    name = "niah"
    description = "RULER-style single needle: a magic number or UUID for a key, among near-miss distractors"
    variants = ("essay", "noise")
    sources: ClassVar[dict[str, str]] = {
        "essay": sources.ESSAY_LICENCE + "; fallback: RULER's noise sentences",
        "noise": "RULER's repeated noise sentences (no licence needed)",
    }

    def built(self, variant: str) -> str:
        return "essay" if variant == "essay" and sources.essays() else "noise"

    def generate(self, size_tokens: int, index: int, seed: int, variant: str) -> EvalItem:
        rng = rng_for(self.name, variant, size_tokens, seed, index)
        kind = "numbers" if index % 2 == 0 else "uuids"
        key = _key(rng)

        def value() -> str:
            return (
                str(rng.randint(1_000_000, 9_999_999))
                if kind == "numbers"
                else str(uuid.UUID(int=rng.getrandbits(128)))
            )

        gold = value()
        essay = sources.essays() if variant == "essay" else None
        filler, source = essay if essay else (NOISE, self.sources["noise"])
        target = size_tokens * 4
        distractors = [NEEDLE.format(kind=kind, key=k, value=value()) for k in _near_misses(key)]
        needle = NEEDLE.format(kind=kind, key=key, value=gold)
        budget = target - len(needle) - sum(len(d) + 1 for d in distractors) - 1
        start = rng.randrange(len(filler)) if essay else 0
        hay = (filler * (budget // len(filler) + 2))[start : start + max(budget, 0)] if budget > 0 else ""
        hay = hay[: max(budget, 0)]
        depth = 0.5 if index == 0 else (index * 0.37 + 0.05) % 1.0  # a deterministic sweep over depths
        inserts = [(int(depth * len(hay)), needle)] + [(rng.randrange(len(hay) + 1), d) for d in distractors]
        pieces, pos = [], 0
        for at, sentence in sorted(inserts):
            cut = max(pos, _sentence_start(hay, at))
            pieces += [hay[pos:cut], " " + sentence + " "]
            pos = cut
        pieces.append(hay[pos:])
        context = "".join(pieces)
        question = (
            f"What is the special magic {kind[:-1]} for {key} mentioned in the provided text? "
            f"Give the {kind[:-1]} only."
        )
        return EvalItem(
            family=self.name,
            variant="essay" if essay else "noise",
            id=item_id(self.name, "essay" if essay else "noise", size_tokens, seed, index),
            size_tokens=size_tokens,
            question=question,
            context=context,
            gold=gold,
            spec={"key": key, "kind": kind, "depth": round(depth, 3)},
            key={"distractors": distractors},
            source=source,
        )

    def score(self, answer: str, item: EvalItem) -> Score:
        ruler = ruler_contains(answer, item.gold)
        return Score(ruler, {"ruler": ruler, "strict": strict_match(answer, item.gold)})

    # --- the oracle's side -----------------------------------------------------------------------------
    def _find(self, text: str, item: EvalItem) -> str | None:
        kind, key = item.spec["kind"], item.spec["key"]
        pattern = re.escape(NEEDLE.format(kind=kind, key=key, value="@@")).replace("@@", r"([0-9a-f-]+)")
        match = re.search(pattern, text)
        return match.group(1) if match else None

    def evidence(self, text: str, item: EvalItem) -> list[str]:
        value = self._find(text, item)
        return (
            []
            if value is None
            else [NEEDLE.format(kind=item.spec["kind"], key=item.spec["key"], value=value)]
        )

    def oracle_reply(self, prompt: str, item: EvalItem, noise: Noise) -> str:
        value = self._find(prompt, item)
        if value is None:
            return "NONE"
        if noise.flips(item.id, "niah"):
            return item.key["distractors"][0].rsplit(" ", 1)[-1].rstrip(".")
        return value

    def root_turns(self, item: EvalItem) -> list[str]:
        kind, key = item.spec["kind"], item.spec["key"]
        ask = f"Question: {item.question_line}\n{FIND} {kind[:-1]} for {key} in the text below. Reply with it, or NONE."
        return [
            repl("print(len(context))\nprint(peek(0, 300))", "Let me look at the context."),
            repl(
                f"""{BATCHED}
chunks = partition(size=60_000)
replies = batched([{ask!r} + "\\n\\n" + c for c in chunks])
found = [r.strip() for r in replies if r.strip() and r.strip() != "NONE"]
answer = found[0] if found else "not found"
print(len(chunks), found)
""",
                "Search every chunk with a sub-call.",
            ),
            "FINAL_VAR(answer)",
        ]


def _sentence_start(text: str, at: int) -> int:
    """The start of the sentence holding `at` (so needles never split a word)."""
    if at <= 0 or at >= len(text):
        return max(0, min(at, len(text)))
    dot = text.rfind(". ", max(0, at - 400), at)
    return dot + 2 if dot >= 0 else at
