"""The text view of a context that grep, peek and partition work on, in the sandboxed worker.

A :class:`TextView` renders a context (str, list or dict) as one text, built on first use, and maps
text offsets back to list items, document paths and line numbers. Standard library only.
"""

from __future__ import annotations

import json
from bisect import bisect_right

__all__ = ["LINE_INDEX_SHIFT", "TextView", "dumps", "is_document"]

LINE_INDEX_SHIFT = 13  # grep's line index keeps the newline count before every 8 KiB block of the text


def is_document(item: object) -> bool:
    return isinstance(item, dict) and "path" in item and "text" in item


def dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


class TextView:
    """A text rendering of a context plus an index from text offsets to list items.

    The text is built lazily on first access and cached. For list contexts ``offsets[i]``
    is where item ``i`` starts in the text; a document (a dict with "path" and "text")
    renders as a ``=== path ===`` header line followed by its text.
    """

    def __init__(self, context: object) -> None:
        self.context = context
        self.kind = "str" if isinstance(context, str) else "dict" if isinstance(context, dict) else "other"
        if isinstance(context, (list, tuple)):
            docs = len(context) > 0 and all(is_document(it) for it in context)
            self.kind = "documents" if docs else "list"
        self._text: str | None = None
        self._offsets: list[int] | None = None
        # Per list item, filled when the text is built (read them after `text` or `offsets`): the length
        # of its "=== path ===" line with its newline (0 when the item is not a document), and its path.
        self.header_lens: list[int] = []
        self.paths: list[str | None] = []
        # newlines before offset b << LINE_INDEX_SHIFT, for each block b; grown by `extend_line_index`
        self.line_index: list[int] = [0]

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self._build()
        return self._text

    @property
    def offsets(self) -> list[int] | None:
        """Start offset of each list item in the text (None for non-list contexts)."""
        if self._text is None:
            self._text = self._build()
        return self._offsets

    def _build(self) -> str:
        ctx = self.context
        if isinstance(ctx, str):
            return ctx
        if isinstance(ctx, dict):
            return json.dumps(ctx, ensure_ascii=False, indent=1, default=str)
        if not isinstance(ctx, (list, tuple)):
            return str(ctx)
        pieces: list[str] = []
        offsets: list[int] = []
        pos = 0
        for item in ctx:
            offsets.append(pos)
            head_len, path = 0, None
            if isinstance(item, str):
                pieces.append(item)
            elif is_document(item):
                assert isinstance(item, dict)
                path = str(item["path"])
                head = "=== " + path.replace("\n", " ") + " ==="  # always a single line
                body = item["text"] if isinstance(item["text"], str) else str(item["text"])
                pieces += (head, body)  # joined by "\n" like all pieces: no copy of the body
                head_len = len(head) + 1
            else:
                pieces.append(dumps(item))
            self.header_lens.append(head_len)
            self.paths.append(path)
            pos += head_len + len(pieces[-1]) + 1
        self._offsets = offsets
        return "\n".join(pieces)

    def __len__(self) -> int:
        return len(self.text)

    def __repr__(self) -> str:
        size = "not built" if self._text is None else f"{len(self._text):,} chars"
        return f"TextView(kind={self.kind!r}, {size})"

    def item_at(self, offset: int) -> int | None:
        """Index of the list item containing ``offset`` (None for str/dict contexts or out of range)."""
        offsets = self.offsets
        if not offsets or offset < 0 or offset > len(self.text):
            return None
        return bisect_right(offsets, offset) - 1

    def path_at(self, offset: int) -> str | None:
        """Path of the document containing ``offset`` (None when it is not in a document)."""
        index = self.item_at(offset)
        return None if index is None else self.paths[index]

    def build_line_index(self) -> None:
        """Precompute grep's line index (otherwise built by the first grep that needs it)."""
        self.extend_line_index(len(self.text) >> LINE_INDEX_SHIFT)

    def extend_line_index(self, block: int) -> None:
        """Grow `line_index` to cover blocks 0..`block`."""
        index, count = self.line_index, self.text.count
        k, acc = len(index), index[-1]
        while k <= block:
            acc += count("\n", (k - 1) << LINE_INDEX_SHIFT, k << LINE_INDEX_SHIFT)
            index.append(acc)
            k += 1

    def line_of(self, offset: int) -> int:
        """1-based number of the line holding ``offset`` in the whole text view."""
        b = offset >> LINE_INDEX_SHIFT
        if b >= len(self.line_index):
            self.extend_line_index(b)
        return self.line_index[b] + 1 + self.text.count("\n", b << LINE_INDEX_SHIFT, offset)
