"""The demo behind `bash scripts/demo.sh`: generate the support tickets, ask rlmx the question about them,
and show the gold answer beside rlmx's answer.

    python -m examples.support_tickets.demo [options for `rlmx ask`, e.g. --model openai:gpt-5-mini]

The exit code says whether rlmx worked, not whether the model was right: 0 when rlmx answered (its exit
0, or 3 when a limit stopped the run first) and also when a limit stopped a run whose model gave no
answer at all (rlmx worked; the model did not: the summary says so), rlmx's own code otherwise (1 a run
error such as a failed provider, 2 bad usage or configuration). stdout holds the comparison only (with `--json`: rlmx's JSON object with a `gold`
field added, and the comparison goes to stderr); rlmx's progress and errors go to stderr as it runs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from examples.support_tickets.generate import QUESTION, generate

DATA = Path(__file__).resolve().parent / "data"
ANSWERED = (0, 3)  # rlmx's exit codes for a run that produced an answer
EMBEDDED_NOTE = (
    "note: this answer comes from the embedded demo model (SmolLM2-135M, in-process). It is tiny and "
    "is here only to show rlmx running with no key and no server; its answers to a question like this "
    "are unreliable. For a real answer, name a model, e.g. "
    "RLMX_MODEL=openai:gpt-5-mini OPENAI_API_KEY=sk-... bash scripts/demo.sh"
)


def option_value(argv: Sequence[str], name: str) -> str | None:
    """The value of `--name VALUE` or `--name=VALUE` among `rlmx ask`'s arguments (the last one wins)."""
    found = None
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith(name + "="):
            found = arg.split("=", 1)[1]
    return found


def needs_embedded_model(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> bool:
    """Whether `rlmx ask` with these arguments would run the embedded demo model: no --model, no
    $RLMX_MODEL, no model in a config file, no provider key. scripts/demo.sh installs the model (a
    llama.cpp build) only then. A config file rlmx would refuse is not a reason to install it."""
    from rlmx.config import choose_models, load_config
    from rlmx.errors import ConfigError

    if option_value(argv, "--model") is not None:
        return False
    try:
        config = load_config(option_value(argv, "--config"))
    except ConfigError:
        return False  # rlmx says what is wrong with it
    try:
        return choose_models(None, None, config, environ).embedded
    except ConfigError:
        return True  # no model anywhere, and the embedded one is not installed yet


def write_example(folder: Path = DATA) -> tuple[Path, int]:
    """The tickets file and its gold answer (the same seed every time, so the same file)."""
    text, gold, _ = generate()
    folder.mkdir(parents=True, exist_ok=True)
    tickets = folder / "tickets.txt"
    tickets.write_text(text, encoding="utf-8")
    payload = {"question": QUESTION, "answer": gold}
    (folder / "gold.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return tickets, gold


def matches(answer: Any, gold: int) -> bool:
    """The answer is the gold number: the number itself, or a text whose only number it is."""
    if isinstance(answer, bool):
        return False
    if isinstance(answer, (int, float)):
        return answer == gold
    return re.findall(r"-?\d+", str(answer).replace(",", "")) == [str(gold)]


def cells_line(result: dict[str, Any]) -> str:
    """How many code cells ran: a run whose replies held no code block used the REPL not at all."""
    cells = result.get("cells")
    if cells is None:
        return "unknown (this rlmx does not report it)"
    if cells == 0 and result.get("stopped_by") == "error":
        return "0 code cells ran (the run failed before any)"
    if cells == 0:
        return (
            "0 code cells ran: no reply held a ```python block, so nothing was run in the REPL "
            "(an RLM answers by running code on the context; a tiny model rarely writes any)"
        )
    where = f" (model code ran isolated: {result['sandbox']})" if result.get("sandbox") else ""
    return f"{cells} code cell{'s' if cells != 1 else ''} ran in the REPL{where}"


def summary(result: dict[str, Any], gold: int, code: int = 0) -> list[str]:
    """The gold answer and rlmx's answer side by side, how the run ended, and what to make of it. The
    embedded model's warning comes first: an answer from it is not to be trusted."""
    answer = result.get("answer")
    shown = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
    shown = " ".join(str(shown).split()) if answer is not None else "(none)"
    models = sorted((result.get("usage") or {}).get("by_model") or {})
    model = result.get("model") or ", ".join(models) or "unknown"
    turns = f"{result.get('iterations')} turn(s)"
    stopped = result.get("stopped_by")
    ended = f"finished after {turns}" if stopped == "final" else f"{stopped} limit reached after {turns}"
    if stopped == "error":
        ended = f"failed after {turns}: {result.get('error')}"
    lines = (
        [EMBEDDED_NOTE] if model.startswith("local:") or any(m.startswith("local:") for m in models) else []
    )
    lines += [
        f"question:     {QUESTION}",
        f"gold answer:  {gold}",
        f"rlmx answer:  {shown[:300] or '(empty)'}",
        f"verdict:      {'matches' if matches(answer, gold) else 'differs from'} the gold answer",
        f"run:          {ended} (rlmx exit {code}); model: {model}",
        f"cells:        {cells_line(result)}",
    ]
    if result.get("trace_path"):
        lines.append(f"trace:        {result['trace_path']} (`.venv/bin/rlmx view` turns it into a page)")
    return lines


def run(argv: Sequence[str], *, out: TextIO, err: TextIO, folder: Path = DATA) -> int:
    """Write the example into `folder`, run `rlmx ask` on it with `argv`, print the comparison (also
    when rlmx found no answer but reported its run: the summary says what happened)."""
    tickets, gold = write_example(folder)
    wants_json = "--json" in argv
    err.write(f"demo: asking rlmx about {tickets} (5,000 tickets; the gold answer is {gold})\n")
    err.flush()
    command = [sys.executable, "-m", "rlmx.cli", "ask", QUESTION, "--context", str(tickets), *argv]
    if not wants_json:
        command.append("--json")
    proc = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)  # stderr: as it runs
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        result = None
    if not isinstance(result, dict):
        if proc.returncode not in ANSWERED:
            err.write(f"demo: rlmx did not answer (exit {proc.returncode}); its error is above\n")
            return proc.returncode if proc.returncode > 0 else 1
        err.write(f"demo: rlmx exited {proc.returncode} but printed no JSON object: {proc.stdout[:200]!r}\n")
        return 1
    lines = summary(result, gold, proc.returncode)
    if wants_json:
        out.write(json.dumps({**result, "gold": gold}, ensure_ascii=False) + "\n")
        err.write("\n".join(lines) + "\n")
    else:
        out.write("\n".join(lines) + "\n")
    if proc.returncode in ANSWERED:
        return 0
    if result.get("stopped_by") not in ("error", "interrupted", None):
        err.write(
            f"demo: rlmx worked, but the model gave no answer before the {result['stopped_by']} limit "
            f"(rlmx exit {proc.returncode}); the summary above says what it did\n"
        )
        return 0
    err.write(
        f"demo: rlmx did not answer (exit {proc.returncode}); the summary above says how the run went\n"
    )
    return proc.returncode if proc.returncode > 0 else 1


def main(argv: Sequence[str] | None = None) -> int:
    return run(sys.argv[1:] if argv is None else argv, out=sys.stdout, err=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
