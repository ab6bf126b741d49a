"""What grep returns beyond its Matches: whether its cap cut the result, and how many lines matched.

The count goes on with grep's own iterator of regex matches and grep's own line rules (one line counted
once, document header lines and the empty "line" after a trailing newline not at all), but builds no
line numbers and no :class:`~rlmx.repl.helpers.Match`: about the cost of the regex scan itself.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlmx.repl.textview import TextView

DEFAULT_MAX_MATCHES = 1000


@dataclass(repr=False, slots=True)
class Match:
    """One matching line; ``start`` is the offset of the line's start in the text view."""

    path: str | None
    line_no: int
    line: str
    start: int
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        head = "" if self.path is None else self.path
        main = f"{head}:{self.line_no}: {self.line}" if head else f"{self.line_no}: {self.line}"
        if not self.before and not self.after:
            return main
        ctx = f"{head}-" if head else ""
        first = self.line_no - len(self.before)
        out = [f"{ctx}{first + i}- {line}" for i, line in enumerate(self.before)]
        out.append(main)
        out += [f"{ctx}{self.line_no + 1 + i}- {line}" for i, line in enumerate(self.after)]
        return "\n".join(out)

    __repr__ = __str__


class GrepResult(list["Match"]):
    """What grep returns: the list of Matches, plus ``truncated`` (max_matches cut it) and ``total``
    (the number of matching lines: exact, or a lower bound when ``exact`` is False, i.e. with
    ``count_all=False``)."""

    truncated: bool = False
    total: int = 0
    exact: bool = True

    def notice(self, cap: int) -> str:
        """The line a cell's output gets when the default cap cut this result."""
        total = f"{self.total:,}" if self.exact else f"at least {self.total:,}"
        return (
            f"grep: {len(self):,} of {total} matching lines shown (max_matches={cap}); "
            "grep(..., max_matches=None) returns all, len(result) / result.total counts"
        )


def finish(out: GrepResult, view: TextView, rest: Iterator[re.Match[str]], line_end: int, all_: bool) -> None:
    """Set ``out.total`` and ``out.truncated`` by counting the matching lines ``rest`` still holds."""
    more = _count_lines(view, rest, line_end, None if all_ else 1)
    out.truncated = more > 0
    out.total = len(out) + more
    out.exact = all_ or not more


def _count_lines(view: TextView, rest: Iterator[re.Match[str]], line_end: int, limit: int | None) -> int:
    """How many more lines grep would report from the matches ``rest`` (after the line ending at
    ``line_end``), up to ``limit``: grep's own line rules, without line numbers or Match objects."""
    text = view.text
    n_text = len(text)
    find = text.find
    n = 0
    if view.offsets is None:  # one text: only the empty "line" after a trailing newline is not a line
        for m in rest:
            pos = m.start()
            if pos <= line_end:
                continue
            if pos >= n_text and (n_text == 0 or text[-1] == "\n"):
                break
            le = find("\n", pos)
            line_end = n_text if le < 0 else le
            n += 1
            if n == limit:
                break
        return n
    offsets, header_lens, rfind = view.offsets, view.header_lens, text.rfind
    item_hi, in_doc, text_start, region_hi = -1, False, 0, n_text
    for m in rest:
        pos = m.start()
        if pos <= line_end:
            continue
        ls = rfind("\n", line_end + 1, pos) + 1 or line_end + 1
        if ls >= n_text:
            break
        le = find("\n", pos)
        line_end = n_text if le < 0 else le
        if ls >= item_hi:
            i = bisect_right(offsets, ls) - 1
            item_hi = offsets[i + 1] if i + 1 < len(offsets) else n_text + 1
            in_doc = bool(header_lens[i])
            text_start = offsets[i] + header_lens[i]
            region_hi = min(item_hi - 1, n_text)
        if in_doc and (ls < text_start or ls >= region_hi):
            continue
        n += 1
        if n == limit:
            break
    return n
