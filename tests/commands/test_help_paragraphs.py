"""Every command's --help at a wide terminal: a paragraph is wrapped at the terminal's width, never at the
source's line breaks (no line ends mid-sentence with the next one going on in lowercase)."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys

import pytest
import typer

from rlmx.cli import app


def _commands() -> list[list[str]]:
    """Every command path: [], ["ask"], ["traces", "prune"], ..."""
    root = typer.main.get_command(app)
    paths: list[list[str]] = [[]]
    for name, command in getattr(root, "commands", {}).items():
        paths.append([name])
        paths.extend([name, sub] for sub in getattr(command, "commands", {}))
    return paths


WIDTH = 200


def _prose(help_text: str) -> list[str]:
    """The help's lines outside the option tables (right-stripped), blank lines kept as ''."""
    return [line.rstrip() for line in help_text.splitlines() if not line.strip().startswith(("╭", "│", "╰"))]


def _broken(lines: list[str], width: int = WIDTH) -> list[str]:
    """Lines ended before the terminal's edge (the next line's first word would have fitted, with the
    formatter's margin) although the sentence goes on in lowercase on the next line."""
    out = []
    for line, after in itertools.pairwise(lines):
        if not line.strip() or not after.strip() or re.search(r"[.:!?)]$", line):
            continue
        word = after.split()[0]
        if re.match(r"[a-z`-]", word) and len(line) + 1 + len(word) < width - 2:
            out.append(f"{line.strip()!r} / {after.strip()!r}")
    return out


def test_the_check_finds_a_paragraph_broken_at_the_source() -> None:
    assert _broken([" unless --oracle; the", " baselines use it."])
    assert not _broken([" One sentence.", "", " another paragraph."])
    assert not _broken([" " + "x" * 190 + " the", " baselines use it."])  # the terminal's own wrap


@pytest.mark.parametrize("path", _commands(), ids=lambda p: " ".join(p) or "rlmx")
def test_no_help_paragraph_is_broken_mid_sentence(path: list[str]) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "rlmx", *path, "--help"], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert _broken(_prose(proc.stdout)) == []


@pytest.mark.parametrize(
    ("path", "says"),
    [([], "130 interrupted"), (["batch"], "130 interrupted"), (["doctor"], "130: interrupted")],
)
def test_the_exit_codes_in_the_help_include_130_interrupted(path: list[str], says: str) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "rlmx", *path, "--help"], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0 and says in " ".join(proc.stdout.split())
