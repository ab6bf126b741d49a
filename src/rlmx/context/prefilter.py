"""The optional pre-filter stage: narrow a huge context to the K chunks that best match the question.

Off by default. `RLM(prefilter="bm25:50")` or `rlmx ask --prefilter bm25:50` makes the worker, right after
loading, keep only the 50 best chunks (BM25 over ~1,200-character chunks; "vector" and "hybrid" need the
`vector` extra). The root model is told it sees a filtered view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlmx.errors import ConfigError

METHODS = ("bm25", "vector", "hybrid")


@dataclass(frozen=True)
class Prefilter:
    method: str = "bm25"
    k: int = 50

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"unknown pre-filter method {self.method!r}; use one of {', '.join(METHODS)}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ConfigError(f"the pre-filter's K must be an int >= 1, got {self.k!r}")

    @classmethod
    def parse(cls, spec: str | Prefilter | None) -> Prefilter | None:
        """ "bm25:50" (method:K), "bm25" (K = 50), a Prefilter, or None / "" / "off" for no pre-filter."""
        if spec is None or isinstance(spec, Prefilter):
            return spec
        text = str(spec).strip().lower()
        if text in ("", "off", "none"):
            return None
        method, _, k = text.partition(":")
        if k and not k.isdigit():
            raise ConfigError(f"bad pre-filter {spec!r}: write METHOD:K, e.g. bm25:50")
        return cls(method, int(k) if k else 50)

    def options(self, query: str) -> dict[str, Any]:
        """What the worker needs; raises ConfigError at once when the method's libraries are missing."""
        from importlib.util import find_spec

        from rlmx.repl import search, vectors

        if find_spec("bm25s") is None:
            raise ConfigError(f"the pre-filter {search.BM25_HINT}")
        if self.method != "bm25" and not vectors.available():
            raise ConfigError(f"the {self.method} pre-filter: {vectors.VECTOR_HINT}")
        return {"method": self.method, "k": self.k, "query": query}


def apply_prefilter(
    value: Any, *, query: str, method: str, k: int, cache_dir: str | None
) -> tuple[Any, dict[str, Any] | None]:
    """The K best chunks as documents (in their original order) and what the metadata says about it.

    A context of K chunks or fewer is kept whole (None: nothing to say); when no chunk matches at all,
    the whole context is kept and the metadata says so.
    """
    from rlmx.repl.search import SearchIndex
    from rlmx.repl.textview import TextView

    view = TextView(value)
    index = SearchIndex(view, cache_dir=cache_dir)
    total = len(index.spans()[0])
    if total <= k:
        return value, None
    documents = len(value) if isinstance(value, (list, tuple)) else 1
    info: dict[str, Any] = {
        "method": method,
        "chunks": total,
        "source_documents": documents,
        "source_chars": len(view.text),
    }
    hits = index.search(query, k=k, mode=method)
    if not hits:
        return value, {**info, "kept": 0}
    hits.sort(key=lambda h: h.start)
    docs = [
        {
            "path": h.path if h.path is not None else "context",
            "line_no": h.line_no,
            "score": round(h.score, 4),
            "text": h.text,
        }
        for h in hits
    ]
    return docs, {**info, "kept": len(docs)}
