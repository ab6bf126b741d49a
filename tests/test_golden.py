"""Golden snapshots of what users see: every command's --help, `rlmx ask --json`, a trace's run_start and
run_end records, `RunResult.to_dict()` and `rlmx.__all__` (batch and serve: tests/test_golden_services.py).

The recorded files live in tests/golden/ (help/<command>.txt, *.json: normalised JSON, sorted keys,
indented; see tests/golden_support.py for what is normalised). A test fails when what it renders now
differs from its file, when a command has no file, and when a help file names no command.

To record a deliberate change, rewrite the files and review the diff:

    RLMX_UPDATE_GOLDEN=1 python -m pytest -q tests/test_golden.py tests/test_golden_services.py
    git diff tests/golden/
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from examples.support_tickets.generate import QUESTION, generate
from typer.main import get_command
from typer.testing import CliRunner

import rlmx
from golden_support import GOLDEN, check_json, check_text, normalise, plain, updating
from policies import tickets_policy
from rlmx import RLM
from rlmx.cli import app
from rlmx.testing import ScriptedModel, ScriptedServer

RLMX = [sys.executable, "-m", "rlmx.cli"]
# a fixed terminal: 100 columns, no colour, no terminal features (rich reads COLUMNS when it renders)
TERMINAL = {"COLUMNS": "100", "LINES": "50", "TERM": "dumb", "NO_COLOR": "1", "TERMINAL_WIDTH": "100"}


# --- every command's --help ----------------------------------------------------------------------------


def command_paths() -> list[tuple[str, ...]]:
    """Every command of the app, found by walking it: () for `rlmx`, then ("ask",), ("prompts", "list"), ..."""
    found: list[tuple[str, ...]] = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        found.append(path)
        for name, sub in sorted(getattr(command, "commands", {}).items()):  # a group's commands
            walk(sub, (*path, name))

    walk(get_command(app), ())
    return found


def help_file(path: tuple[str, ...]) -> str:
    return f"help/{'-'.join(path) or 'rlmx'}.txt"


COMMANDS = command_paths()


def render_help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], prog_name="rlmx", env=TERMINAL, color=False)
    assert result.exit_code == 0, result.output
    return plain(result.output)


def test_the_app_has_commands_and_sub_commands() -> None:
    """The walk finds what `rlmx --help` lists, sub-commands included (so a broken walk cannot pass)."""
    assert ("ask",) in COMMANDS and ("batch",) in COMMANDS and ("serve",) in COMMANDS
    assert any(len(path) == 2 for path in COMMANDS)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(("rlmx", *p)))
def test_help_text(path: tuple[str, ...]) -> None:
    text = render_help(path)
    assert f"Usage: rlmx {' '.join(path)}".rstrip() in text
    check_text(help_file(path), text)


def test_every_help_file_names_a_command() -> None:
    """A command removed or renamed leaves its old golden file behind: that fails here."""
    wanted = {help_file(path) for path in COMMANDS}
    if updating():
        for stale in (GOLDEN / "help").glob("*.txt"):
            if f"help/{stale.name}" not in wanted:
                stale.unlink()
    recorded = {f"help/{p.name}" for p in (GOLDEN / "help").glob("*.txt")}
    assert recorded == wanted, (
        f"no command: {sorted(recorded - wanted)}; no file: {sorted(wanted - recorded)}"
    )


def test_bare_rlmx_prints_the_help() -> None:
    result = CliRunner().invoke(app, [], prog_name="rlmx", env=TERMINAL, color=False)
    assert result.exit_code == 0
    assert plain(result.output).rstrip("\n") == render_help(()).rstrip("\n")  # a last blank line more
    check_text("bare_rlmx.txt", plain(result.output))


# --- the Python API ------------------------------------------------------------------------------------


def test_public_names() -> None:
    check_json("api/all.json", list(rlmx.__all__))


def test_run_result_to_dict() -> None:
    model = ScriptedModel(root=["```repl\nn = len(context)\nprint(n)\n```", "FINAL_VAR(n)"])
    result = RLM(model.lm(), trace=False).run("How long is the context?", "twelve chars")
    out = result.to_dict()
    assert out["answer"] == 12 and out["stopped_by"] == "final"
    check_json("api/run_result.json", normalise(out, subs={result.run_id: "<run_id>"}))


# --- rlmx ask --json and its trace ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def asked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`rlmx ask --json` on a tickets log against the scripted server, with a trace file: what it printed,
    the trace's records and the strings that vary between runs."""
    tmp = tmp_path_factory.mktemp("ask")
    text, gold, _ = generate(seed=3)
    context = tmp / "tickets.txt"
    context.write_text(text)
    trace = tmp / "run.jsonl"
    env = {**os.environ, **TERMINAL, "XDG_STATE_HOME": str(tmp / "state")}
    with ScriptedServer(tickets_policy) as srv:
        args = ["ask", QUESTION, "--context", str(context), "--model", "openai:scripted"]
        args += ["--base-url", srv.url, "--json", "--trace", str(trace)]
        proc = subprocess.run([*RLMX, *args], capture_output=True, text=True, env=env, timeout=120)
        url = srv.url
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    subs = {str(tmp): "<tmp>", url: "<model-server>", out["run_id"]: "<run_id>"}
    return {"out": out, "gold": gold, "records": records, "subs": subs}


def test_ask_json(asked: dict[str, Any]) -> None:
    out = asked["out"]
    assert out["answer"] == asked["gold"] and out["stopped_by"] == "final"
    check_json("ask/json.json", normalise(out, subs=asked["subs"]))


@pytest.mark.parametrize("kind", ["run_start", "run_end"])
def test_trace_record(asked: dict[str, Any], kind: str) -> None:
    records = asked["records"]
    assert records[0]["type"] == "run_start" and records[-1]["type"] == "run_end"
    record = records[0] if kind == "run_start" else records[-1]  # ids are counters: e1, e2, ...
    check_json(f"trace/{kind}.json", normalise(record, subs=asked["subs"]))
