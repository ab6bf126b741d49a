"""What the root model is told about the context: its shape and size, never its content.

`stats_of(value)` measures a context (in the host for values in memory, in the worker for files it
loaded); `render(stats)` turns those figures into the few lines the root prompt carries. The text is
bounded: counts and a handful of paths, so the prompt is the same size for 8K and for 10M tokens.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from pathlib import PurePosixPath
from typing import Any

from rlmx.lm.base import estimate_tokens

SAMPLE_PATHS = 3
TOP_FOLDERS = 4
TOP_EXTENSIONS = 4
EXAMPLES = 4


def is_document(item: Any) -> bool:
    return isinstance(item, dict) and "path" in item and "text" in item


def size_summary(values: list[int]) -> list[int]:
    """[min, median, 90th percentile, max], or [] for no values."""
    if not values:
        return []
    ordered = sorted(values)
    n = len(ordered)
    median = (ordered[(n - 1) // 2] + ordered[n // 2]) // 2
    p90 = ordered[min(n - 1, (n * 9) // 10)]
    return [ordered[0], median, p90, ordered[-1]]


def path_stats(paths: list[str]) -> dict[str, Any]:
    """A sample of paths, the top-level folders (below the folder all paths share) and the file
    extensions, with counts."""
    folders: Counter[str] = Counter()
    extensions: Counter[str] = Counter()
    try:
        shared = posixpath.commonpath([posixpath.dirname(p) for p in paths]) if paths else ""
    except ValueError:  # absolute and relative paths mixed
        shared = ""
    for path in paths:
        parent = posixpath.dirname(path)
        if shared and parent.startswith(shared):
            parent = parent[len(shared) :]
        top = parent.lstrip("/").split("/", 1)[0]
        if top:
            folders[top + "/"] += 1
        extensions[PurePosixPath(path).suffix.lower() or "(none)"] += 1
    return {
        "paths": paths[:SAMPLE_PATHS],
        "folders": dict(folders.most_common(TOP_FOLDERS)),
        "n_folders": len(folders),
        "extensions": dict(extensions.most_common(TOP_EXTENSIONS)),
        "n_extensions": len(extensions),
    }


def stats_of(context: Any) -> dict[str, Any]:
    """Shape and size of a context value, as JSON-able figures (no content but a few paths and keys)."""
    if context is None:
        return {"kind": "none"}
    if isinstance(context, str):
        lines = context.count("\n") + (1 if context and not context.endswith("\n") else 0)
        return {"kind": "str", "chars": len(context), "lines": lines}
    if isinstance(context, dict):
        keys = [str(k) for k in context]
        return {"kind": "dict", "count": len(keys), "keys": keys[:12]}
    if isinstance(context, (list, tuple)):
        if context and all(is_document(item) for item in context):
            sizes = [len(d["text"]) if isinstance(d["text"], str) else len(str(d["text"])) for d in context]
            stats = {
                "kind": "documents",
                "count": len(sizes),
                "chars": sum(sizes),
                "sizes": size_summary(sizes),
                **path_stats([str(d["path"]) for d in context]),
            }
            images = Counter(
                str(d["image"].get("format")) for d in context if isinstance(d.get("image"), dict)
            )
            if images:
                stats["images"] = dict(images.most_common())
            return stats
        kinds = Counter(type(item).__name__ for item in context)
        sizes = [len(item) if isinstance(item, str) else len(str(item)) for item in context]
        key_counts = Counter(str(k) for item in context[:50] if isinstance(item, dict) for k in item)
        return {
            "kind": "list",
            "count": len(context),
            "chars": sum(sizes),
            "sizes": size_summary(sizes),
            "item_kinds": dict(kinds.most_common()),
            "keys": [k for k, _ in key_counts.most_common(12)],
        }
    return {"kind": "other", "type_name": type(context).__name__}


def _n(value: int) -> str:
    return f"{value:,}"


def _plural(count: int, noun: str) -> str:
    return f"{_n(count)} {noun}{'' if count == 1 else 's'}"


def _sizes_line(label: str, sizes: list[int], unit: str) -> str:
    if not sizes:
        return f"{label}: none."
    lo, median, p90, hi = sizes
    return f"{label}: min {_n(lo)}, median {_n(median)}, 90th percentile {_n(p90)}, max {_n(hi)} {unit}."


def _counts(counts: dict[str, int], total: int, noun: str) -> str:
    text = ", ".join(f"{name} ({_n(n)})" for name, n in counts.items())
    more = total - len(counts)
    return text + (f", and {_n(more)} more {noun}" if more > 0 else "")


def brief(stats: dict[str, Any]) -> str:
    """A context's shape in a few words ("a str of 1,024 characters")."""
    kind, count = stats.get("kind"), stats.get("count", 0)
    if kind == "str":
        return f"a str of {stats.get('chars', 0):,} characters"
    if kind == "documents":
        return f"a list of {count:,} documents ({stats.get('chars', 0):,} characters)"
    if kind == "list":
        return f"a list of {count:,} items"
    if kind == "dict":
        return f"a dict with {count:,} keys"
    if kind == "none":
        return "None"
    return f"a {stats.get('type_name', 'value')}"


def render(stats: dict[str, Any], *, note: str | None = None) -> str:
    """The metadata lines for the root prompt."""
    kind = stats.get("kind")
    unit = "bytes on disk" if stats.get("estimated") else "characters"
    about = "about " if stats.get("estimated") else ""
    lines: list[str] = []
    if kind == "none":
        lines.append("There is no context for this question (`context` is None).")
    elif kind == "str":
        chars = stats["chars"]
        lines.append(
            f"Your context is a str of {about}{_n(chars)} {unit} (about {_n(estimate_tokens(chars))} tokens)"
            + (f", {_n(stats['lines'])} lines." if "lines" in stats else ".")
        )
    elif kind == "documents":
        chars = stats["chars"]
        lines.append(
            f"Your context is a list of {_plural(stats['count'], 'document')} (dicts with 'path' and 'text'), "
            f"{about}{_n(chars)} {unit} in all (about {_n(estimate_tokens(chars))} tokens)."
        )
        lines.append(_sizes_line("Document sizes", stats.get("sizes", []), unit))
        if stats.get("folders"):
            lines.append(
                "Top-level folders: " + _counts(stats["folders"], stats["n_folders"], "folders") + "."
            )
        if stats.get("extensions"):
            lines.append("File types: " + _counts(stats["extensions"], stats["n_extensions"], "types") + ".")
        paths = stats.get("paths", [])
        more = ", ..." if stats["count"] > len(paths) else ""
        lines.append(f"First paths: {', '.join(paths)}{more}")
        if stats.get("images"):
            lines.append(_images_line(stats["images"]))
    elif kind == "list" and not stats.get("count"):
        lines.append("Your context is an empty list.")
    elif kind == "list":
        kinds = ", ".join(f"{_n(n)} {k}" for k, n in stats.get("item_kinds", {}).items())
        chars = stats["chars"]
        lines.append(
            f"Your context is a list of {_n(stats['count'])} items ({kinds}), about {_n(chars)} characters "
            f"(about {_n(estimate_tokens(chars))} tokens)."
        )
        lines.append(_sizes_line("Item sizes", stats.get("sizes", []), "characters"))
        if stats.get("keys"):
            lines.append("Keys of dict items: " + ", ".join(stats["keys"]))
    elif kind == "dict":
        keys = stats.get("keys", [])
        more = ", ..." if stats["count"] > len(keys) else ""
        lines.append(f"Your context is a dict with {_n(stats['count'])} keys: {', '.join(keys)}{more}.")
    else:
        lines.append(f"Your context is a {stats.get('type_name', 'value')}.")
    lines.extend(_loading_lines(stats))
    if note:
        lines.append(note)
    return "\n".join(lines)


def _images_line(images: dict[str, int]) -> str:
    formats = ", ".join(f"{name} ({_n(n)})" for name, n in images.items())
    return (
        f"Images among them: {_n(sum(images.values()))} ({formats}); an image document's 'text' is '' and "
        "'image' holds {'format', 'width', 'height', 'bytes'}; the pixels stay with the host. Show them to "
        "a vision model with llm_query(prompt, images=[doc, ...])."
    )


def _loading_lines(stats: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    filtered = stats.get("filtered")
    if filtered and not filtered.get("kept"):
        lines.append(
            f"A {filtered['method']} pre-filter was asked for, but no chunk matched the question, so this is "
            "the whole context."
        )
    elif filtered:
        lines.append(
            f"This is a FILTERED VIEW: the {_plural(filtered['kept'], 'chunk')} (of {_n(filtered['chunks'])}) "
            f"that best match the question by {filtered['method']} search over the full context "
            f"({_n(filtered['source_chars'])} characters in {_n(filtered['source_documents'])} documents). "
            "Each is a dict with 'path', 'line_no' (its first line in that file), 'score' and 'text', in "
            "their original order. The rest of the context is not available: say so if the answer may be "
            "outside this view."
        )
    skipped = stats.get("skipped")
    if skipped and skipped.get("count"):
        reasons = ", ".join(f"{_n(n)} {r}" for r, n in skipped["by_reason"].items())
        examples = "; ".join(skipped.get("examples", []))
        lines.append(f"Left out {_plural(skipped['count'], 'file')} ({reasons}), e.g. {examples}.")
    notes = stats.get("notes")
    if notes and notes.get("count"):
        lines.append(
            f"Notes on {_plural(notes['count'], 'file')}: " + "; ".join(notes.get("examples", [])) + "."
        )
    return lines


def tally(items: list[tuple[str, str]]) -> dict[str, Any]:
    """(path, reason) pairs as a count, counts by reason and a few examples (for skipped files, notes)."""
    by_reason = Counter(reason.split(" (")[0] for _, reason in items)
    return {
        "count": len(items),
        "by_reason": dict(by_reason.most_common()),
        "examples": [f"{path}: {reason}" for path, reason in items[:EXAMPLES]],
    }


def describe(context: Any, *, note: str | None = None) -> str:
    """A few lines on the context's type and size, enough to plan, never the content."""
    return render(stats_of(context), note=note)
