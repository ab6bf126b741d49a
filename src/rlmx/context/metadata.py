"""What the root model is told about the context: its shape and size, never its content."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from rlmx.lm.base import estimate_tokens


def is_document(item: Any) -> bool:
    return isinstance(item, dict) and "path" in item and "text" in item


def _sizes(values: list[int]) -> str:
    if not values:
        return "none"
    return f"min {min(values):,}, median {int(statistics.median(values)):,}, max {max(values):,} characters"


def describe(context: Any, *, note: str | None = None) -> str:
    """A few lines on the context's type and size, enough to plan, never the content."""
    lines: list[str] = []
    if context is None:
        lines.append("There is no context for this question (`context` is None).")
    elif isinstance(context, str):
        n_lines = context.count("\n") + (1 if context and not context.endswith("\n") else 0)
        lines.append(
            f"Your context is a str of {len(context):,} characters (about {estimate_tokens(context):,} tokens), "
            f"{n_lines:,} lines."
        )
    elif isinstance(context, list):
        docs = [item for item in context if is_document(item)]
        if context and len(docs) == len(context):
            sizes = [len(str(d["text"])) for d in docs]
            total = sum(sizes)
            lines.append(
                f"Your context is a list of {len(docs):,} documents (dicts with 'path' and 'text'), "
                f"{total:,} characters in all (about {estimate_tokens(total):,} tokens)."
            )
            lines.append(f"Document sizes: {_sizes(sizes)}.")
            sample = ", ".join(str(d["path"]) for d in docs[:5])
            lines.append(f"First paths: {sample}{', ...' if len(docs) > 5 else ''}")
        else:
            kinds = Counter(type(item).__name__ for item in context)
            sizes = [len(item) if isinstance(item, str) else len(str(item)) for item in context]
            total = sum(sizes)
            kind_text = ", ".join(f"{n:,} {k}" for k, n in kinds.most_common())
            lines.append(
                f"Your context is a list of {len(context):,} items ({kind_text}), about {total:,} characters "
                f"(about {estimate_tokens(total):,} tokens)."
            )
            lines.append(f"Item sizes: {_sizes(sizes)}.")
            dict_items = [item for item in context[:50] if isinstance(item, dict)]
            if dict_items:
                key_counts = Counter(str(k) for item in dict_items for k in item)
                lines.append("Keys of dict items: " + ", ".join(k for k, _ in key_counts.most_common(12)))
    elif isinstance(context, dict):
        names = [str(k) for k in context]
        lines.append(
            f"Your context is a dict with {len(names):,} keys: {', '.join(names[:12])}"
            f"{', ...' if len(names) > 12 else ''}."
        )
    else:
        lines.append(f"Your context is a {type(context).__name__}.")
    if note:
        lines.append(note)
    return "\n".join(lines)
