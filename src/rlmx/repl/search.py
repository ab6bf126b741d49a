"""`search(query, k=10)` in the REPL: BM25 (and optional vector) search over chunks of the context.

The index is built on first use, not at worker start, and cached on disk (in the folder the host
names, `rlmx.paths.search_cache_dir()`) under a key made from the context's text, so a second run (or a child RLM over the same context) loads it instead of rebuilding.
When the cache folder cannot be written (a locked-down sandbox), the index lives in memory only and
`SearchIndex.note` says so. `bm25s` and `numpy` are imported on first use.
"""

from __future__ import annotations

import json
import os
import re
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlmx.repl.textview import TextView

PREVIEW_CHARS = 240
DEFAULT_CHUNK_CHARS = 1_200  # about 300 tokens: what a small embedding model reads whole
MODES = ("bm25", "vector", "hybrid")
INDEX_VERSION = 1
_WORD = re.compile(r"(?u)\b\w\w+\b")
BM25_HINT = "search needs bm25s: pip install 'rlmx[context]'"


@dataclass(slots=True, repr=False)
class Hit:
    """One chunk found by `search`: where it is, how well it matched, and its whole text."""

    path: str | None
    line_no: int  # first line of the chunk, counted within its document (1-based)
    start: int  # offset of the chunk in the text view (what `peek` slices)
    end: int
    score: float
    text: str
    focus: int = 0  # where in `text` the query's first word appears: the printed preview starts near it

    def __str__(self) -> str:
        where = f"{self.path}:{self.line_no}" if self.path is not None else f"line {self.line_no}"
        lo = max(0, min(self.focus - 60, len(self.text) - PREVIEW_CHARS))
        lo = self.text.rfind(" ", 0, lo) + 1 if lo else 0
        preview = " ".join(self.text[lo : lo + PREVIEW_CHARS].split())
        before = "... " if lo else ""
        after = " ..." if lo + PREVIEW_CHARS < len(self.text) else ""
        return f"[{self.score:.3g}] {where}: {before}{preview}{after}"

    __repr__ = __str__


def text_key(text: str, *parts: object) -> str:
    """A content hash of the text plus the settings that shape an index built from it."""
    import hashlib  # here: OpenSSL's bindings cost every REPL's start ~13 ms, and few runs search

    digest = hashlib.blake2b(digest_size=16)
    for start in range(0, len(text), 1 << 22):
        digest.update(text[start : start + (1 << 22)].encode("utf-8", "surrogatepass"))
    digest.update(json.dumps([INDEX_VERSION, *parts], default=str).encode())
    return digest.hexdigest()


def regions(view: TextView) -> list[tuple[int, int]]:
    """Spans of the text view that chunks may not cross: each document's text, each list item, or all."""
    text, offsets = view.text, view.offsets
    if not offsets:
        return [(0, len(text))] if text else []
    ends = [*offsets[1:], len(text) + 1]
    spans = []
    for i, (lo, hi) in enumerate(zip(offsets, ends, strict=True)):
        lo += view.header_lens[i]  # a document's "=== path ===" line is not searched
        if hi - 1 > lo:
            spans.append((lo, hi - 1))  # without the newline joining items
    return spans


def chunk_spans(view: TextView, chunk_chars: int) -> tuple[array[int], array[int]]:
    """Chunk starts and ends: at most `chunk_chars` long, cut after a newline (or a space) where possible."""
    text = view.text
    starts: array[int] = array("q")
    ends: array[int] = array("q")
    for lo, hi in regions(view):
        pos = lo
        while pos < hi:
            end = min(hi, pos + chunk_chars)
            if end < hi:
                cut = text.rfind("\n", pos + chunk_chars // 4, end)
                if cut < 0:
                    cut = text.rfind(" ", pos + chunk_chars // 4, end)
                end = cut + 1 if cut >= 0 else end
            if not text[pos:end].isspace():
                starts.append(pos)
                ends.append(end)
            pos = end
    return starts, ends


class SearchIndex:
    """Chunks of a text view and their BM25 (and, on request, vector) index, built lazily."""

    def __init__(
        self, view: TextView, *, cache_dir: str | None = None, chunk_chars: int = DEFAULT_CHUNK_CHARS
    ):
        self.view = view
        self.cache_dir = cache_dir
        self.chunk_chars = chunk_chars
        self.note: str | None = None if cache_dir else "search index kept in memory (no cache folder given)"
        self._key: str | None = None
        self._starts: array[int] | None = None
        self._ends: array[int] | None = None
        self._bm25: Any = None
        self._vectors: Any = None
        self.loaded_from_cache = False  # True when the BM25 index came from the disk cache

    # --- the REPL function -------------------------------------------------------------------------
    def search(self, query: str, k: int = 10, mode: str = "bm25") -> list[Hit]:
        """The `k` chunks that best match `query`, best first. mode: "bm25" | "vector" | "hybrid"."""
        if not isinstance(query, str) or not query.strip():
            raise ValueError("search: query must be a non-empty string")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"search: k must be an int >= 1, got {k!r}")
        if mode not in MODES:
            raise ValueError(f"search: mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}")
        if not self.spans()[0]:
            return []
        if mode == "bm25":
            ranked = self.bm25_ranking(query, k)
        elif mode == "vector":
            ranked = self.vector_ranking(query, k)
        else:
            ranked = fuse([self.bm25_ranking(query, 100 + k), self.vector_ranking(query, 100 + k)])[:k]
        hits = [self.hit(i, score) for i, score in ranked]
        words = [w for w in _WORD.findall(query.lower()) if len(w) > 2] or [query.lower().strip()]
        for hit in hits:
            lower = hit.text.lower()
            hit.focus = min((p for p in (lower.find(w) for w in words) if p >= 0), default=0)
        return hits

    # --- chunks -------------------------------------------------------------------------------------
    def spans(self) -> tuple[array[int], array[int]]:
        if self._starts is None or self._ends is None:
            self._starts, self._ends = chunk_spans(self.view, self.chunk_chars)
        return self._starts, self._ends

    def chunk_texts(self, lo: int = 0, hi: int | None = None) -> list[str]:
        starts, ends = self.spans()
        text = self.view.text
        return [text[starts[i] : ends[i]] for i in range(lo, len(starts) if hi is None else hi)]

    def key(self) -> str:
        if self._key is None:
            self._key = text_key(self.view.text, self.chunk_chars)
        return self._key

    def hit(self, i: int, score: float) -> Hit:
        starts, ends = self.spans()
        start, end = starts[i], ends[i]
        view, text = self.view, self.view.text
        index = view.item_at(start)
        if index is not None and view.offsets is not None:
            first = view.offsets[index] + view.header_lens[index]
            line_no = text.count("\n", first, start) + 1
        else:
            line_no = text.count("\n", 0, start) + 1
        return Hit(view.path_at(start), line_no, start, end, float(score), text[start:end])

    # --- BM25 ---------------------------------------------------------------------------------------
    def bm25_ranking(self, query: str, k: int) -> list[tuple[int, float]]:
        retriever = self._bm25 or self._load_or_build_bm25()
        words = [
            w for w in _WORD.findall(query.lower()) if w in retriever.vocab_dict and w not in _stopwords()
        ]
        if not words:
            return []
        k = min(k, len(self.spans()[0]))
        ids, scores = retriever.retrieve([words], k=k, show_progress=False, n_threads=1)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if s > 0]

    def _load_or_build_bm25(self) -> Any:
        try:
            import bm25s
        except ImportError as exc:
            raise RuntimeError(BM25_HINT) from exc
        folder = self._cache_path("bm25")
        if folder is not None and (folder / "params.index.json").exists():
            self._bm25 = bm25s.BM25.load(str(folder), show_progress=False)
            self.loaded_from_cache = True
            return self._bm25
        self._bm25 = build_bm25(self)
        if folder is not None:
            self._store(folder, lambda tmp: self._bm25.save(tmp, show_progress=False))
        return self._bm25

    # --- vectors ------------------------------------------------------------------------------------
    def vector_ranking(self, query: str, k: int) -> list[tuple[int, float]]:
        from rlmx.repl import vectors

        if self._vectors is None:
            folder = self._cache_path("vectors")
            self._vectors = vectors.load_matrix(folder) if folder is not None else None
            if self._vectors is None:
                total = len(self.spans()[0])
                batches = (self.chunk_texts(lo, min(total, lo + 1024)) for lo in range(0, total, 1024))
                self._vectors = vectors.embed_batches(batches)
                if folder is not None:
                    self._store(folder, lambda tmp: vectors.save_matrix(tmp, self._vectors))
        return vectors.top_k(self._vectors, query, k)

    # --- the disk cache -----------------------------------------------------------------------------
    def _cache_path(self, kind: str) -> Path | None:
        if not self.cache_dir:
            return None
        return Path(self.cache_dir) / f"{kind}-{self.key()}"

    def _store(self, folder: Path, write: Any) -> None:
        """Write an index into `folder` atomically; an unwritable cache means memory only, said once."""
        import shutil
        import tempfile

        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            tmp = tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent)
        except OSError as exc:
            self.note = f"search index kept in memory: cannot write {folder.parent} ({exc.strerror})"
            self.cache_dir = None
            return
        try:
            write(tmp)
            os.replace(tmp, folder)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if not folder.exists():  # another process may have stored the same index first
                self.note = f"search index kept in memory: cannot write {folder} ({exc.strerror})"


def build_bm25(index: SearchIndex) -> Any:
    """A bm25s index over the chunks, tokenized in batches (bounded memory for the texts)."""
    import bm25s
    from bm25s.tokenization import Tokenizer

    tokenizer = Tokenizer(stopwords="en")
    ids: list[list[int]] = []
    total = len(index.spans()[0])
    for lo in range(0, total, 4096):
        batch = index.chunk_texts(lo, min(total, lo + 4096))
        ids += tokenizer.tokenize(batch, update_vocab=True, return_as="ids", show_progress=False)
    retriever = bm25s.BM25()
    retriever.index((ids, tokenizer.get_vocab_dict()), show_progress=False)
    return retriever


_STOPWORDS: frozenset[str] | None = None


def _stopwords() -> frozenset[str]:
    global _STOPWORDS
    if _STOPWORDS is None:
        from bm25s.stopwords import STOPWORDS_EN

        _STOPWORDS = frozenset(STOPWORDS_EN)
    return _STOPWORDS


def fuse(rankings: list[list[tuple[int, float]]], k0: int = 60) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: each ranking adds 1 / (k0 + rank) to a chunk's score."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, (i, _) in enumerate(ranking):
            scores[i] = scores.get(i, 0.0) + 1.0 / (k0 + rank + 1)
    return sorted(scores.items(), key=lambda item: -item[1])
