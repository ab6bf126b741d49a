"""Helpers that model-written REPL code uses to explore a long context.

Imported inside the sandboxed worker process: standard library only, light imports.
:class:`TextView` (from :mod:`rlmx.repl.textview`) renders a context as one text and maps offsets
back to list items and document paths; :func:`peek` slices it; :func:`grep` finds matching
lines fast enough for tens of megabytes; :func:`partition` splits a context into chunks.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable

from rlmx.repl.grepcount import DEFAULT_MAX_MATCHES, GrepResult, Match, finish
from rlmx.repl.textview import LINE_INDEX_SHIFT as _SHIFT
from rlmx.repl.textview import TextView
from rlmx.repl.textview import dumps as _dumps

__all__ = ["GrepResult", "Match", "TextView", "grep", "partition", "peek"]

DEFAULT_CHUNK_CHARS = 100_000
DEFAULT_PEEK_CHARS = 2000
_MODES = ("auto", "lines", "chars", "items", "documents", "tokens")


def peek(view: TextView, start: int = 0, length: int = DEFAULT_PEEK_CHARS) -> str:
    """``length`` characters of the text view from ``start`` (a negative start counts from the end)."""
    if length < 0:
        raise ValueError(f"peek: length must be >= 0, got {length}")
    text = view.text
    if start < 0:
        start = max(0, len(text) + start)
    return text[start : start + length]


def peek_notice(view: TextView, start: int, shown: str) -> str | None:
    """The line a cell's output gets when peek's default length cut the text (None: it did not)."""
    n_text = len(view.text)
    begin = max(0, n_text + start) if start < 0 else min(start, n_text)
    if begin + len(shown) >= n_text:
        return None
    return (
        f"peek: characters {begin:,}-{begin + len(shown):,} of {n_text:,} shown "
        f"(length={DEFAULT_PEEK_CHARS}); peek(start, length) shows others"
    )


def _compile(pattern: str | re.Pattern[str], flags: int) -> re.Pattern[str]:
    if isinstance(pattern, re.Pattern):
        flags |= pattern.flags
        pattern = pattern.pattern
    if not isinstance(pattern, str):
        raise ValueError(f"grep: pattern must be a str, got {type(pattern).__name__}")
    try:
        return re.compile(pattern, flags | re.MULTILINE)
    except re.error as exc:
        raise ValueError(f"grep: invalid regular expression {pattern!r}: {exc}") from None


def _context_lines(text: str, ls: int, le: int, lo: int, hi: int, k: int) -> tuple[list[str], list[str]]:
    """Up to k lines before the line [ls, le) and after it, staying within [lo, hi)."""
    before: list[str] = []
    p = ls
    while len(before) < k and p > lo:
        prev = text.rfind("\n", lo, p - 1) + 1 or lo
        before.append(text[prev : p - 1])
        p = prev
    before.reverse()
    after: list[str] = []
    p = le
    while len(after) < k and p + 1 < hi:
        end = text.find("\n", p + 1, hi)
        end = hi if end < 0 else end
        after.append(text[p + 1 : end])
        p = end
    return before, after


def grep(
    view: TextView,
    pattern: str,
    *,
    flags: int = 0,
    context_lines: int = 0,
    max_matches: int | None = DEFAULT_MAX_MATCHES,
    count_all: bool = True,
) -> GrepResult:
    """Lines of the text view matching the regex ``pattern``, grep-style: one Match per line, in order.

    Line numbers are 1-based. In documents they count from the document's own first line,
    ``path`` is set, and matches on ``=== path ===`` header lines are not reported.
    Context lines never cross a document boundary. At most ``max_matches`` Matches (None: all);
    the result's ``total`` counts every matching line (a scan that builds no Match), or, with
    ``count_all=False``, stops one line past the cap (``total`` is then a lower bound, ``exact`` False).
    """
    if context_lines < 0:
        raise ValueError(f"grep: context_lines must be >= 0, got {context_lines}")
    if max_matches is not None and max_matches < 0:
        raise ValueError(f"grep: max_matches must be >= 0, got {max_matches}")
    rx = _compile(pattern, flags)
    out = GrepResult()
    matches = rx.finditer(view.text)
    if max_matches == 0:
        finish(out, view, matches, -1, count_all)
        return out
    text = view.text
    n_text = len(text)
    offsets, header_lens, paths, line_index = view.offsets, view.header_lens, view.paths, view.line_index
    rfind, find, count = text.rfind, text.find, text.count
    block = 1 << _SHIFT
    last_pos, last_line = 0, 1  # last_pos is always a line start; last_line is its line number
    line_end = -1  # end of the last line seen: later matches up to there are on the same line
    # The list item holding the current line (list contexts only) and, for a document,
    # where its text starts and ends and the global number of its first line.
    item_hi, path, text_start, region_lo, region_hi, first_line = -1, None, 0, 0, n_text, 1

    for m in matches:
        pos = m.start()
        if pos <= line_end:
            continue
        r = rfind("\n", last_pos, pos)
        ls = r + 1 if r >= 0 else last_pos
        if ls >= n_text:
            break  # the empty "line" after a trailing newline is not a line
        le = find("\n", pos)
        if le < 0:
            le = n_text
        if ls - last_pos > block:  # far from the previous line: count from the block index
            b = ls >> _SHIFT
            if b >= len(line_index):
                view.extend_line_index(b)
            line_no = line_index[b] + 1 + count("\n", b << _SHIFT, ls)
        else:
            line_no = last_line + count("\n", last_pos, ls)
        last_pos, last_line, line_end = ls, line_no, le

        if offsets is not None and ls >= item_hi:
            i = bisect_right(offsets, ls) - 1
            item_hi = offsets[i + 1] if i + 1 < len(offsets) else n_text + 1
            if header_lens[i]:
                path = paths[i]
                text_start = region_lo = offsets[i] + header_lens[i]
                region_hi = min(item_hi - 1, n_text)
                if ls < text_start:  # on the header line
                    first_line = line_no + 1
                elif ls - text_start <= block:
                    first_line = line_no - count("\n", text_start, ls)
                else:
                    first_line = view.line_of(text_start)
            else:
                path, text_start, region_lo, region_hi, first_line = None, 0, 0, n_text, 1
        if path is not None and (ls < text_start or ls >= region_hi):
            continue  # a header line, or the empty line after a document's trailing newline
        match = Match(path, line_no - first_line + 1, text[ls:le], ls)
        if context_lines:
            match.before, match.after = _context_lines(text, ls, le, region_lo, region_hi, context_lines)
        out.append(match)
        if len(out) == max_matches:
            finish(out, view, matches, line_end, count_all)
            return out
    out.total = len(out)
    return out


# ----------------------------------------------------------------------------- partition


def _check_count(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"partition: {name} must be an int >= 1, got {value!r}")


def _even_cuts(total: int, n: int) -> list[int]:
    m = min(n, total)
    return [round(k * total / m) for k in range(m + 1)] if m else [0]


def _fixed_cuts(total: int, size: int) -> list[int]:
    return [*range(0, total, size), total] if total else [0]


def _line_cuts_n(text: str, n: int) -> list[int]:
    """Cuts at the line boundaries closest to n equal shares of characters."""
    total = len(text)
    cuts = [0]
    for k in range(1, n):
        target = round(k * total / n)
        below = text.rfind("\n", 0, target) + 1
        above = text.find("\n", target) + 1 or total
        for cut in (below, above) if target - below <= above - target else (above, below):
            if cuts[-1] < cut < total:
                cuts.append(cut)
                break
    return [*cuts, total] if total else cuts


def _line_cuts_size(text: str, size: int) -> list[int]:
    total = len(text)
    cuts = [0]
    while cuts[-1] < total:
        start = cuts[-1]
        if start + size >= total:
            cuts.append(total)
            continue
        r = text.rfind("\n", start, start + size)
        # A line longer than size becomes a chunk of its own.
        cuts.append(r + 1 if r >= 0 else (text.find("\n", start) + 1 or total))
    return cuts


def _text_chunks(text: str, cuts: list[int], overlap: int, whole_lines: bool) -> list[str]:
    chunks: list[str] = []
    for k in range(len(cuts) - 1):
        lo, hi = cuts[k], cuts[k + 1]
        if overlap and k:
            prev = cuts[k - 1]
            start = max(prev, lo - overlap)
            if whole_lines and start > prev and text[start - 1] != "\n":
                start = text.find("\n", start, lo) + 1  # text[lo - 1] is a newline
            lo = start
        chunks.append(text[lo:hi])
    return chunks


def _item_cuts(lengths: list[int], n: int | None, size: int | None) -> list[int]:
    if n is not None:
        return _even_cuts(len(lengths), n)
    if size is not None:
        return _fixed_cuts(len(lengths), size)
    cuts, acc = [0], 0
    for i, length in enumerate(lengths):
        if acc and acc + length > DEFAULT_CHUNK_CHARS:
            cuts.append(i)
            acc = 0
        acc += length
    return [*cuts, len(lengths)] if lengths else cuts


def _resolve_mode(context: object, view: TextView, by: str) -> str:
    if by not in _MODES:
        raise ValueError(f"partition: by must be one of {', '.join(map(repr, _MODES))}, got {by!r}")
    if by != "auto":
        return by
    if isinstance(context, str):
        return "lines" if "\n" in context else "chars"
    if isinstance(context, (list, tuple, dict)):
        return "documents" if view.kind == "documents" else "items"
    return "lines"


def partition(
    context: object,
    view: TextView | None,
    n: int | None = None,
    *,
    size: int | None = None,
    by: str = "auto",
    overlap: int = 0,
    count: Callable[[list[str]], list[int]] | None = None,
) -> list:
    """Split a context into a list of non-empty chunks.

    by="lines"/"chars" split the text view and give str chunks ("lines" never splits a line);
    by="items"/"documents" give lists of the original items (dicts of entries for a dict).
    by="auto": "lines" (or "chars" for a one-line str), "documents" for a list of documents,
    else "items". Give ``n`` (chunk count; balanced by characters for lines/chars, by item
    count for items/documents) or ``size`` (max characters, or max items, per chunk), not
    both; neither makes chunks of about 100,000 characters. ``overlap`` repeats up to that
    many characters (whole lines for "lines") or items from the end of the previous chunk.
    by="tokens" splits the text view into str chunks of at most ``size`` tokens (default 25,000),
    or ``n`` chunks of equal token counts, at line ends; ``overlap`` is then in tokens. It needs
    ``count`` (exact token counts of a batch of texts), which the REPL's ``partition`` passes.
    """
    view = TextView(context) if view is None else view
    mode = _resolve_mode(context, view, by)
    if n is not None and size is not None:
        raise ValueError("partition: give either n (number of chunks) or size (chunk size), not both")
    _check_count("n", n)
    _check_count("size", size)
    if isinstance(overlap, bool) or not isinstance(overlap, int) or overlap < 0:
        raise ValueError(f"partition: overlap must be an int >= 0, got {overlap!r}")

    if mode == "tokens":
        if count is None:
            raise NotImplementedError(
                "by='tokens' needs token counting: pass count= (the REPL's partition does)"
            )
        from rlmx.repl.tokens import partition_text  # stdlib at import; counting is `count`'s job

        return partition_text(context if isinstance(context, str) else view.text, n, size, overlap, count)

    if mode in ("lines", "chars"):
        text = context if isinstance(context, str) else view.text
        if mode == "chars":
            cuts = _even_cuts(len(text), n) if n else _fixed_cuts(len(text), size or DEFAULT_CHUNK_CHARS)
        else:
            cuts = _line_cuts_n(text, n) if n else _line_cuts_size(text, size or DEFAULT_CHUNK_CHARS)
        return _text_chunks(text, cuts, overlap, whole_lines=mode == "lines")

    if mode == "documents" and view.kind != "documents":
        raise ValueError(
            "partition: by='documents' needs a list of dicts that all have 'path' and 'text' keys"
        )
    if isinstance(context, dict):
        entries = list(context.items())
        cuts = _item_cuts([len(_dumps({k: v})) for k, v in entries], n, size)
        return [dict(entries[lo:hi]) for lo, hi in _chunk_spans(cuts, overlap)]
    if not isinstance(context, (list, tuple)):
        raise ValueError(f"partition: by={mode!r} needs a list context, got {type(context).__name__}")
    items = list(context)
    offsets = view.offsets or []
    bounds = [*offsets, len(view.text) + 1]
    lengths = [bounds[i + 1] - bounds[i] for i in range(len(offsets))]
    return [items[lo:hi] for lo, hi in _chunk_spans(_item_cuts(lengths, n, size), overlap)]


def _chunk_spans(cuts: list[int], overlap: int) -> list[tuple[int, int]]:
    """(start, end) of each chunk, starting up to ``overlap`` items inside the previous one."""
    return [(max(cuts[k - 1], cuts[k] - overlap) if k else 0, cuts[k + 1]) for k in range(len(cuts) - 1)]
