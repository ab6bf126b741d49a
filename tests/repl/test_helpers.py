"""Tests for rlmx.repl.helpers: TextView, peek, grep and partition."""

from __future__ import annotations

import json
import random
import re
import time

import pytest

from rlmx.repl.helpers import Match, TextView, grep, partition, peek

DOCS = [
    {"path": "src/a.py", "text": "import os\ndef main():\n    return os.getcwd()"},
    {"path": "docs/b.md", "text": "# Title\nsome text\nmore text about main"},
    {"path": "empty.txt", "text": ""},
    {"path": "c.txt", "text": "main first\nmiddle\nmain last\n"},
]


# ----------------------------------------------------------------------------- TextView


def test_text_view_str_is_identity() -> None:
    text = "line one\nline two"
    view = TextView(text)
    assert view.text is text
    assert view.item_at(3) is None
    assert view.path_at(3) is None
    assert len(view) == len(text)


def test_text_view_list_of_str_and_values() -> None:
    items = ["alpha", "beta\ngamma", {"k": "välue"}, 3, None, [1, 2]]
    view = TextView(items)
    expected = "\n".join(["alpha", "beta\ngamma", '{"k": "välue"}', "3", "null", "[1, 2]"])
    assert view.text == expected
    for index, start in enumerate(view.offsets or []):
        assert view.item_at(start) == index
    assert view.item_at(view.text.index("gamma")) == 1
    assert view.item_at(view.text.index("välue")) == 2
    assert view.path_at(0) is None
    assert view.kind == "list"


def test_text_view_documents() -> None:
    view = TextView(DOCS)
    assert view.kind == "documents"
    assert view.text.startswith("=== src/a.py ===\nimport os\n")
    assert "=== empty.txt ===\n\n=== c.txt ===" in view.text
    assert view.path_at(view.text.index("getcwd")) == "src/a.py"
    assert view.path_at(view.text.index("# Title")) == "docs/b.md"
    assert view.path_at(view.text.index("=== c.txt")) == "c.txt"
    assert view.path_at(len(view.text) - 1) == "c.txt"
    assert view.item_at(view.text.index("middle")) == 3
    assert view.item_at(-1) is None
    assert view.item_at(len(view.text) + 5) is None


def test_text_view_dict_and_lazy_build() -> None:
    ctx = {"b": [1, 2], "a": "ü"}
    view = TextView(ctx)
    assert "not built" in repr(view)
    assert view.text == json.dumps(ctx, ensure_ascii=False, indent=1)
    assert view.item_at(0) is None
    assert view.path_at(0) is None
    assert view.kind == "dict"


def test_mixed_list_is_not_documents() -> None:
    view = TextView([DOCS[0], "plain"])
    assert view.kind == "list"
    assert view.path_at(0) == "src/a.py"
    assert view.path_at(len(view.text) - 1) is None


# ----------------------------------------------------------------------------- peek


def test_peek() -> None:
    view = TextView("0123456789")
    assert peek(view) == "0123456789"
    assert peek(view, 2, 3) == "234"
    assert peek(view, -3) == "789"
    assert peek(view, -3, 2) == "78"
    assert peek(view, -100, 2) == "01"
    assert peek(view, 50) == ""
    with pytest.raises(ValueError):
        peek(view, 0, -1)


# ----------------------------------------------------------------------------- grep


def test_grep_str_basic() -> None:
    text = "apple pie\nbanana\napple apple\ncherry\npineapple"
    matches = grep(TextView(text), "apple")
    assert [(m.line_no, m.line) for m in matches] == [(1, "apple pie"), (3, "apple apple"), (5, "pineapple")]
    assert all(m.path is None for m in matches)
    assert [m.start for m in matches] == [0, text.index("apple apple"), text.index("pineapple")]
    assert str(matches[1]) == "3: apple apple"
    assert repr(matches) == "[1: apple pie, 3: apple apple, 5: pineapple]"


def test_grep_documents_line_numbers_and_paths() -> None:
    view = TextView(DOCS)
    matches = grep(view, "main")
    got = [(m.path, m.line_no, m.line) for m in matches]
    assert got == [
        ("src/a.py", 2, "def main():"),
        ("docs/b.md", 3, "more text about main"),
        ("c.txt", 1, "main first"),
        ("c.txt", 3, "main last"),
    ]
    for m in matches:
        assert view.text[m.start : m.start + len(m.line)] == m.line
        assert view.path_at(m.start) == m.path
    assert str(matches[0]) == "src/a.py:2: def main():"


def test_grep_documents_first_and_last_lines() -> None:
    view = TextView(DOCS)
    assert [(m.path, m.line_no) for m in grep(view, "^import")] == [("src/a.py", 1)]
    assert [(m.path, m.line_no) for m in grep(view, r"getcwd\(\)$")] == [("src/a.py", 3)]
    assert [(m.path, m.line_no) for m in grep(view, "^# Title")] == [("docs/b.md", 1)]


def test_grep_skips_header_lines() -> None:
    view = TextView(DOCS)
    assert grep(view, "===") == []
    assert grep(view, r"\.txt") == []
    assert [m.path for m in grep(view, "a")][:1] == ["src/a.py"]
    # "^$" matches no phantom lines: empty documents and trailing newlines add no lines
    assert grep(view, "^$") == []


def test_grep_list_of_str_and_dicts_counts_lines_in_whole_view() -> None:
    items = ["first", "two\nlines target", {"name": "target"}, "last target"]
    matches = grep(TextView(items), "target")
    assert [(m.path, m.line_no) for m in matches] == [(None, 3), (None, 4), (None, 5)]
    assert matches[1].line == '{"name": "target"}'


def test_grep_context_lines() -> None:
    text = "l1\nl2\nl3 hit\nl4\nl5\nl6 hit"
    matches = grep(TextView(text), "hit", context_lines=2)
    assert matches[0].before == ["l1", "l2"]
    assert matches[0].after == ["l4", "l5"]
    assert matches[1].before == ["l4", "l5"]
    assert matches[1].after == []
    assert str(matches[0]) == "1- l1\n2- l2\n3: l3 hit\n4- l4\n5- l5"
    top = grep(TextView(text), "l1", context_lines=3)[0]
    assert top.before == [] and top.after == ["l2", "l3 hit", "l4"]


def test_grep_context_lines_stay_inside_document() -> None:
    view = TextView(DOCS)
    (first,) = grep(view, "^import", context_lines=2)
    assert first.before == []
    assert first.after == ["def main():", "    return os.getcwd()"]
    (last,) = grep(view, "getcwd", context_lines=5)
    assert last.after == []
    assert last.before == ["import os", "def main():"]
    assert str(last) == "src/a.py-1- import os\nsrc/a.py-2- def main():\nsrc/a.py:3:     return os.getcwd()"
    (tail,) = grep(view, "main last", context_lines=1)
    assert tail.before == ["middle"] and tail.after == []


def test_grep_max_matches_and_flags() -> None:
    text = "\n".join(f"Row {i} ERROR" if i % 2 else f"row {i} error" for i in range(100))
    view = TextView(text)
    assert len(grep(view, "error")) == 50
    assert len(grep(view, "error", flags=re.IGNORECASE)) == 100
    limited = grep(view, "error", flags=re.IGNORECASE, max_matches=7)
    assert [m.line_no for m in limited] == list(range(1, 8))
    assert grep(view, "error", max_matches=0) == []
    assert len(grep(view, re.compile("ERROR", re.IGNORECASE))) == 100


def test_grep_one_match_per_line() -> None:
    matches = grep(TextView("aaa\nbab\nccc\na"), "a")
    assert [(m.line_no, m.line) for m in matches] == [(1, "aaa"), (2, "bab"), (4, "a")]


def test_grep_invalid_pattern_and_arguments() -> None:
    view = TextView("text")
    with pytest.raises(ValueError, match="invalid regular expression"):
        grep(view, "(unclosed")
    with pytest.raises(ValueError):
        grep(view, "x", context_lines=-1)
    with pytest.raises(ValueError):
        grep(view, "x", max_matches=-1)


def test_grep_empty_and_edge_texts() -> None:
    assert grep(TextView(""), "^") == []
    assert [m.line_no for m in grep(TextView("a\n"), "^")] == [1]
    assert [m.line_no for m in grep(TextView("a\n\nb"), "^$")] == [2]
    assert [m.line for m in grep(TextView("x$y\nz"), re.escape("$"))] == ["x$y"]
    assert grep(TextView([]), "x") == []


def test_grep_far_apart_matches_use_line_index() -> None:
    lines = [f"filler line {i}" for i in range(50_000)]
    for i in (3, 20_000, 20_001, 49_999):
        lines[i] = f"needle at {i}"
    text = "\n".join(lines)
    view = TextView(text)
    for _ in range(2):  # the second run reuses the index built by the first
        assert [(m.line_no, m.line) for m in grep(view, "needle")] == [
            (i + 1, f"needle at {i}") for i in (3, 20_000, 20_001, 49_999)
        ]
    big_docs = [{"path": f"d{k}", "text": text} for k in range(3)]
    got = [(m.path, m.line_no) for m in grep(TextView(big_docs), "needle at 49999|needle at 3$")]
    assert got == [("d0", 4), ("d0", 50_000), ("d1", 4), ("d1", 50_000), ("d2", 4), ("d2", 50_000)]


def _naive_grep(text: str, pattern: str, flags: int = 0) -> list[tuple[int, str]]:
    rx = re.compile(pattern, flags)
    return [(i + 1, line) for i, line in enumerate(text.splitlines()) if rx.search(line)]


PATTERNS = ["a", "ab", "^a", "b$", "a.b", "c+", "^$", "^", "[ab]{2}", "A", r"\bab\b", "b a"]


def test_grep_matches_naive_on_random_texts() -> None:
    rng = random.Random(1234)
    for _ in range(300):
        text = "".join(rng.choice("ab c\n\n") for _ in range(rng.randint(0, 300)))
        pattern = rng.choice(PATTERNS)
        flags = rng.choice([0, re.IGNORECASE])
        got = [(m.line_no, m.line) for m in grep(TextView(text), pattern, flags=flags, max_matches=10**6)]
        assert got == _naive_grep(text, pattern, flags), (text, pattern)


def test_grep_matches_naive_on_random_documents() -> None:
    rng = random.Random(99)
    for _ in range(100):
        docs = [
            {"path": f"p{k}", "text": "".join(rng.choice("ab c\n") for _ in range(rng.randint(0, 60)))}
            for k in range(rng.randint(1, 6))
        ]
        pattern = rng.choice(PATTERNS)
        got = [(m.path, m.line_no, m.line) for m in grep(TextView(docs), pattern, max_matches=10**6)]
        expected = [(d["path"], no, line) for d in docs for no, line in _naive_grep(d["text"], pattern)]
        assert got == expected, (docs, pattern)


@pytest.mark.large
def test_grep_speed_close_to_finditer() -> None:
    rng = random.Random(5)
    words = ["alpha", "beta", "gamma", "delta", "user", "12345", "login", "refund", "the"]
    lines = [" ".join(rng.choices(words, k=rng.randint(3, 12))) for _ in range(200_000)]
    for i in rng.sample(range(len(lines)), 300):
        lines[i] += " needle42"
    text = "\n".join([*lines, ""]) * 4  # about 35 MB of short lines
    view = TextView(text)
    view.build_line_index()

    def best(fn: object) -> float:
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            fn()  # type: ignore[operator]
            times.append(time.perf_counter() - t0)
        return min(times)

    base = best(lambda: list(re.finditer("needle42", text)))
    ours = best(lambda: grep(view, "needle42", max_matches=10**6))
    assert len(grep(view, "needle42", max_matches=10**6)) == 1200
    assert ours <= 1.5 * base + 0.005, (ours, base)


# ----------------------------------------------------------------------------- partition


def _lines_text(rng: random.Random, n_lines: int) -> str:
    return "\n".join("x" * rng.randint(0, 80) for _ in range(n_lines)) + "\n"


def test_partition_auto_modes() -> None:
    assert partition("a\nb\n", TextView("a\nb\n"), size=2) == ["a\n", "b\n"]
    assert partition("abcdef", TextView("abcdef"), size=4) == ["abcd", "ef"]
    items = ["a", "b", "c"]
    assert partition(items, TextView(items), size=2) == [["a", "b"], ["c"]]
    assert partition(DOCS, TextView(DOCS), 2) == [DOCS[:2], DOCS[2:]]
    assert partition(DOCS, None, size=3) == [DOCS[:3], DOCS[3:]]


def test_partition_chars() -> None:
    text = "abcdefghij"
    view = TextView(text)
    assert partition(text, view, 3, by="chars") == ["abc", "defg", "hij"]
    assert partition(text, view, size=4, by="chars") == ["abcd", "efgh", "ij"]
    assert partition(text, view, size=4, by="chars", overlap=2) == ["abcd", "cdefgh", "ghij"]
    assert partition(text, view, 50, by="chars") == list(text)
    assert partition("", TextView(""), 3, by="chars") == []


def test_partition_lines_never_splits_lines() -> None:
    rng = random.Random(7)
    text = _lines_text(rng, 500)
    view = TextView(text)
    for kwargs in ({"n": 1}, {"n": 3}, {"n": 7}, {"n": 10_000}, {"size": 100}, {"size": 1000}, {}):
        chunks = partition(text, view, by="lines", **kwargs)
        assert "".join(chunks) == text
        assert all(chunk and chunk.endswith("\n") for chunk in chunks)
        if "n" in kwargs:
            assert len(chunks) <= kwargs["n"]
        if "size" in kwargs:
            assert all(len(c) <= kwargs["size"] or c.count("\n") == 1 for c in chunks)


def test_partition_lines_n_balances_characters() -> None:
    # Few long lines then many short ones: balancing by line count would be lopsided.
    text = "".join("L" * 999 + "\n" for _ in range(10)) + "".join("s\n" for _ in range(5000))
    chunks = partition(text, TextView(text), 2, by="lines")
    assert len(chunks) == 2
    assert abs(len(chunks[0]) - len(chunks[1])) < 1000


def test_partition_lines_long_line_is_own_chunk() -> None:
    text = "short\n" + "y" * 50 + "\nshort again\nend"
    chunks = partition(text, TextView(text), size=20, by="lines")
    assert chunks == ["short\n", "y" * 50 + "\n", "short again\nend"]


def test_partition_lines_overlap_is_whole_lines() -> None:
    text = "aaaa\nbbbb\ncccc\ndddd\n"
    view = TextView(text)
    assert partition(text, view, size=10, overlap=5) == ["aaaa\nbbbb\n", "bbbb\ncccc\ndddd\n"]
    assert partition(text, view, size=10, overlap=7) == ["aaaa\nbbbb\n", "bbbb\ncccc\ndddd\n"]
    assert partition(text, view, size=10, overlap=3) == ["aaaa\nbbbb\n", "cccc\ndddd\n"]
    assert partition(text, view, 4, overlap=100) == ["aaaa\n", "aaaa\nbbbb\n", "bbbb\ncccc\n", "cccc\ndddd\n"]


def test_partition_str_single_line_chunks_concatenate() -> None:
    rng = random.Random(3)
    text = "".join(rng.choice("abc ") for _ in range(12_345))
    for kwargs in ({"n": 4}, {"size": 1000}, {}):
        chunks = partition(text, TextView(text), **kwargs)
        assert "".join(chunks) == text
        assert all(chunks)


def test_partition_default_size_is_about_100k_chars() -> None:
    text = "z" * 250_000
    assert [len(c) for c in partition(text, TextView(text))] == [100_000, 100_000, 50_000]
    items = ["w" * 999 for _ in range(350)]  # 1,000 characters each in the text view
    chunks = partition(items, TextView(items))
    assert [len(c) for c in chunks] == [100, 100, 100, 50]


def test_partition_items() -> None:
    items = [{"id": i} for i in range(10)]
    view = TextView(items)
    assert partition(items, view, 3) == [items[0:3], items[3:7], items[7:10]]
    assert partition(items, view, size=4) == [items[0:4], items[4:8], items[8:10]]
    assert partition(items, view, size=4, overlap=1) == [items[0:4], items[3:8], items[7:10]]
    assert partition(items, view, 100) == [[item] for item in items]
    chunks = partition(items, view, 3)
    assert all(chunk[0] is items[sum(len(c) for c in chunks[:k])] for k, chunk in enumerate(chunks))
    assert partition([], TextView([]), 3) == []


def test_partition_documents_and_lines_of_a_list() -> None:
    view = TextView(DOCS)
    assert partition(DOCS, view, by="documents", size=1, overlap=1) == [
        [DOCS[0]],
        [DOCS[0], DOCS[1]],
        [DOCS[1], DOCS[2]],
        [DOCS[2], DOCS[3]],
    ]
    chunks = partition(DOCS, view, 3, by="lines")
    assert "".join(chunks) == view.text
    assert all(isinstance(c, str) and c for c in chunks)


def test_partition_dict_items() -> None:
    ctx = {f"k{i}": i for i in range(5)}
    assert partition(ctx, TextView(ctx), 2) == [{"k0": 0, "k1": 1}, {"k2": 2, "k3": 3, "k4": 4}]
    assert partition(ctx, TextView(ctx), size=2, overlap=1)[1] == {"k1": 1, "k2": 2, "k3": 3}


def test_partition_bad_arguments() -> None:
    text = "a\nb"
    view = TextView(text)
    with pytest.raises(ValueError, match="not both"):
        partition(text, view, 2, size=3)
    for bad in ({"n": 0}, {"size": 0}, {"n": -2}, {"size": 1.5}, {"overlap": -1}, {"by": "words"}):
        with pytest.raises(ValueError):
            partition(text, view, **bad)  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError, match="by='tokens' needs token counting"):
        partition(text, view, by="tokens")
    with pytest.raises(ValueError, match="documents"):
        partition(["a", "b"], TextView(["a", "b"]), by="documents")
    with pytest.raises(ValueError, match="list context"):
        partition(text, view, by="items")


def test_partition_random_no_empty_chunks() -> None:
    rng = random.Random(11)
    for _ in range(200):
        text = "".join(rng.choice("ab\n") for _ in range(rng.randint(0, 200)))
        view = TextView(text)
        by = rng.choice(["lines", "chars"])
        if rng.random() < 0.5:
            chunks = partition(text, view, rng.randint(1, 30), by=by)
        else:
            chunks = partition(text, view, size=rng.randint(1, 40), by=by)
        assert all(chunks)
        assert "".join(chunks) == text
        with_overlap = partition(text, view, size=rng.randint(1, 40), by=by, overlap=rng.randint(0, 10))
        assert all(with_overlap)


def test_match_is_dataclass_like() -> None:
    m = Match("p", 3, "line", 10)
    assert m.before == [] and m.after == []
    assert str(Match(None, 2, "x", 0)) == "2: x"
