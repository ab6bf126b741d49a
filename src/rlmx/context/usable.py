"""Whether a context holds anything to work on, and the one-line messages that say what was skipped.

Runs in the host before any model call, from the scan's manifest (files) or the value (in memory), so an
empty or unusable context is refused before it costs anything. `Context.check_usable` and
`Context.skipped_summary` are the entry points; this module builds their text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rlmx.context.metadata import is_document

if TYPE_CHECKING:
    from rlmx.context.sources import Manifest

OVERRIDE = "pass `allow_empty_context`=True to run anyway"
EXAMPLE_NAMES = 3  # names shown in a message, across all reasons
GIVEN_NAMES = 3  # inputs named when saying what was given
_RULES = {  # Manifest.excluded keys, as the message says them
    "include": "not matching `include`",
    "exclude": "matching `exclude`",
    ".gitignore": "ignored by .gitignore",
    "hidden": "hidden (dotfiles)",
}


def reason_key(reason: str) -> str:
    """A skip reason without its detail: "unreadable (Permission denied)" -> "unreadable"."""
    return reason.split(" (")[0]


def skipped_counts(skipped: Sequence[tuple[str, str]], limit: int = EXAMPLE_NAMES) -> str:
    """ "2 binary (a.png, b.bin), 1 empty (notes.txt)": counts by reason, most frequent first, with at most
    `limit` example names in all (each reason gets one before any gets a second)."""
    groups: dict[str, list[str]] = {}
    for name, reason in skipped:
        groups.setdefault(reason_key(reason), []).append(name)
    ordered = sorted(groups.items(), key=lambda item: -len(item[1]))
    shown: dict[str, int] = {key: 0 for key, _ in ordered}
    budget = limit
    while budget > 0:
        took = False
        for key, names in ordered:
            if budget > 0 and shown[key] < len(names):
                shown[key] += 1
                budget -= 1
                took = True
        if not took:
            break
    parts = []
    for key, names in ordered:
        examples = names[: shown[key]]
        more = ", ..." if len(names) > len(examples) and examples else ""
        listed = f" ({', '.join(examples)}{more})" if examples else ""
        parts.append(f"{len(names):,} {key}{listed}")
    return ", ".join(parts)


def skipped_summary(manifest: Manifest) -> str | None:
    """One line for stderr on the files the scan left out, or None when it left out none."""
    if not manifest.skipped:
        return None
    total = len(manifest.files) + len(manifest.inline) + len(manifest.skipped)
    noun = "file" if total == 1 else "files"
    return f"skipped {len(manifest.skipped):,} of {total:,} {noun}: {skipped_counts(manifest.skipped)}"


def given_text(specs: Sequence[str]) -> str:
    """What the user gave, for a message: "context logs/, notes.md" or "standard input ('-')"."""
    names = ["standard input ('-')" if spec == "-" else spec for spec in specs]
    if names == ["standard input ('-')"]:
        return names[0]
    shown = ", ".join(names[:GIVEN_NAMES])
    more = f" and {len(names) - GIVEN_NAMES} more" if len(names) > GIVEN_NAMES else ""
    return f"context {shown}{more}"


def files_problem(specs: Sequence[str], manifest: Manifest) -> str | None:
    """Why a scanned context holds nothing usable (one line), or None when some input is left to read."""
    if manifest.files or manifest.inline:
        return None
    given = given_text(specs)
    if not specs:
        return f"no context paths were given; name a file or a folder, or {OVERRIDE}"
    excluded = _excluded_text(manifest.excluded)
    skipped = manifest.skipped
    if manifest.single and len(skipped) == 1:
        what = f"it is {skipped[0][1]}"
    elif skipped:
        what = f"{_all_files(len(skipped))} skipped: {skipped_counts(skipped)}"
        if excluded:
            what += f"; besides, {excluded}"
    elif excluded:
        what = f"no file is left once {excluded}"
    else:
        what = "it has no files" if len(specs) == 1 else "they have no files"
    hint = "pipe some text in" if list(specs) == ["-"] else None
    return f"{given} holds no usable text: {what}; {_hint(manifest.excluded, hint)}"


def _all_files(count: int) -> str:
    return "its one file was" if count == 1 else f"all {count:,} files were"


def _excluded_text(excluded: Counter[str]) -> str:
    """ "12 not matching `include` and 2 hidden (dotfiles) are left out"."""
    rules = [*_RULES, *sorted(set(excluded) - set(_RULES))]
    parts = [f"{excluded[rule]:,} {_RULES.get(rule, rule)}" for rule in rules if excluded.get(rule)]
    if not parts:
        return ""
    listed = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
    return f"{listed} {'is' if sum(excluded.values()) == 1 else 'are'} left out"


def _hint(excluded: Counter[str], default: str | None = None) -> str:
    fixes = []
    if excluded.get("include") or excluded.get("exclude"):
        fixes.append("fix the `include`/`exclude` globs")
    if excluded.get(".gitignore"):
        fixes.append("`gitignore`=False reads ignored files")
    if excluded.get("hidden"):
        fixes.append("hidden=True reads dotfiles")
    if not fixes:
        fixes.append(default or "point it at text files")
    return ", ".join(fixes) + f", or {OVERRIDE}"


def value_problem(value: Any, origin: str | None = None) -> str | None:
    """Why a value in memory holds nothing usable (one line), or None. None itself ("no context") and
    non-empty values that are not text (numbers, a list of dicts) are usable."""
    what = _value_emptiness(value)
    if what is None:
        return None
    given = origin or "the context"
    return f"{given} holds no usable text: {what}; give it some text, or {OVERRIDE}"


def _value_emptiness(value: Any) -> str | None:
    if isinstance(value, str):
        if not value:
            return "it is an empty str"
        return f"it is only whitespace ({len(value):,} characters)" if value.isspace() else None
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        if not data or data.isspace():
            return "it is empty bytes" if not data else "it is bytes of only whitespace"
        from rlmx.context.decode import decode_bytes

        decoded = decode_bytes(data)
        return None if decoded.text is not None else f"it is bytes that are not text ({decoded.skip})"
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        kind = type(value).__name__
        if not value:
            return f"it is an empty {kind}"
        if isinstance(value, (list, tuple)) and all(_blank_item(item) for item in value):
            items = "1 item that is" if len(value) == 1 else f"{len(value):,} items that are all"
            return f"it is a {kind} of {items} empty text"
    return None


def _blank_item(item: Any) -> bool:
    text = item["text"] if is_document(item) else item
    return isinstance(text, str) and (not text or text.isspace())


def loaded_problem(stats: dict[str, Any], given: str) -> str | None:
    """Why a context, as the worker measured it after reading it, holds nothing usable, or None.

    The host's scan judges files by their first KiB; a PDF with no text layer, an undecodable file or
    an HTML page with no visible text is found out only when the worker reads it."""
    kind = stats.get("kind")
    empty = (
        kind == "none"
        or (kind == "str" and not stats.get("chars"))
        or (kind in ("list", "documents") and not stats.get("count"))
    )
    if not empty:
        return None
    skipped = stats.get("skipped") or {}
    if skipped.get("count"):
        reasons = ", ".join(f"{n:,} {r}" for r, n in skipped.get("by_reason", {}).items())
        examples = "; ".join(skipped.get("examples", [])[:EXAMPLE_NAMES])
        what = f"{_all_files(skipped['count'])} left out once read ({reasons}), e.g. {examples}"
    else:
        what = "it is empty once read"
    return f"{given} holds no usable text: {what}; point it at text files, or {OVERRIDE}"
