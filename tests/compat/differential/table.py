"""The differential table: scenario | official | rlmx.compat | same?

    PYTHONPATH=src .venv/bin/python tests/compat/differential/table.py [SCENARIO ... | quickstart]

Runs the scenarios (the official environment is made first if missing) and prints a Markdown table;
pytest prints the same table after the differential tests (RLMX_DIFF_TABLE=path also writes it).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from diff_compare import differing, summary
from diff_harness import Observation, ensure_official_env, run_side
from diff_scenarios import BY_NAME, SCENARIOS


def verdict(name: str, official: Observation, compat: Observation) -> str:
    """same / deliberate (fields): the documented reason / **differs** (fields)."""
    from test_differential import deliberate_for

    differs = differing(official, compat)
    if compat.crash and not official.crash:
        return f"**differs**: compat crashed ({compat.crash[:80]})"
    if not differs:
        return "same"
    by_reason: dict[str, list[str]] = {}
    undocumented = []
    for field, values in differs.items():
        entry = deliberate_for(name, field)
        if entry is not None and entry.holds(*values):
            by_reason.setdefault(entry.reason.split(": no request")[0], []).append(field)
        else:
            undocumented.append(field)
    notes = [f"deliberate ({', '.join(fields)}): {reason}" for reason, fields in by_reason.items()]
    if undocumented:
        notes.insert(0, f"**differs** ({', '.join(undocumented)})")
    return "; ".join(notes)


def render(observed: dict[str, tuple[Observation, Observation]]) -> str:
    rows = ["| scenario | official rlms 0.1.3 | rlmx.compat.rlms | same? |", "|---|---|---|---|"]
    order = [s.name for s in SCENARIOS]
    for name in sorted(observed, key=lambda n: order.index(n) if n in order else len(order)):
        off, comp = observed[name]
        cells = [name, summary(off), summary(comp), verdict(name, off, comp)]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)


def documented() -> str:
    """The documented differences and the rewordings, one line each, for a note beside the table."""
    from diff_compare import REWORDINGS
    from test_differential import DELIBERATE

    lines = ["Documented differences (test_differential.DELIBERATE):"]
    lines += [f"- {scenario} / {field}: {entry.reason}" for (scenario, field), entry in DELIBERATE.items()]
    lines.append("Lines each side words its own way, compared by what they carry (diff_compare.REWORDINGS):")
    lines.append(
        "- <system prompt>: rlmx writes its own (docs/dialects.md); compared whole where the user gave it"
    )
    lines += [f"- {r.name}: {r.reason}" for r in REWORDINGS]
    return "\n".join(lines)


def main(names: list[str]) -> None:
    ensure_official_env()
    observed = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or [*(s.name for s in SCENARIOS), "quickstart"]:
            if name == "quickstart":
                from test_quickstart_official import run_quickstart

                off, comp = (
                    run_quickstart(side, Path(tmp) / name / side)[1] for side in ("official", "compat")
                )
                observed[name] = (off, comp)
                print(f"{name}: {verdict(name, off, comp)}", file=sys.stderr, flush=True)
                continue
            scenario = BY_NAME[name]
            pair = (
                run_side("official", scenario, Path(tmp) / name / "official"),
                run_side("compat", scenario, Path(tmp) / name / "compat"),
            )
            observed[name] = pair
            print(f"{name}: {verdict(name, *pair)}", file=sys.stderr, flush=True)
    print(render(observed))
    print()
    print(documented())


if __name__ == "__main__":
    main(sys.argv[1:])
