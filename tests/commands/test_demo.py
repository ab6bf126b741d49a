"""The demo shows what an RLM did (cells run, the model used) and installs the embedded model only
when nothing else is configured."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from examples.support_tickets import demo

from policies import is_forced_final, repl, turn
from rlmx.testing import ScriptedServer

ASK = [
    sys.executable,
    "-m",
    "rlmx",
    "ask",
    "q?",
    "--json",
    "--no-trace",
    "--model",
    "openai:scripted",
    "--quiet",
]
NO_KEYS = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}


def run_demo(tmp_path: Path, policy: Any, *extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with ScriptedServer(policy) as srv:
        args = ["--model", "openai:scripted", "--base-url", srv.url, "--no-trace", "--quiet", *extra]
        code = demo.run(args, out=out, err=err, folder=tmp_path)
    return code, out.getvalue(), err.getvalue()


def test_a_run_whose_replies_held_no_code_says_no_cell_ran(tmp_path: Path) -> None:
    def prose(messages: list[dict[str, Any]], request: Any) -> str:
        return "I believe there are about 40 billing tickets." if not is_forced_final(request) else "40"

    code, out, _ = run_demo(tmp_path, prose, "--max-iterations", "2")
    assert code == 0, out
    cells = next(line for line in out.splitlines() if line.startswith("cells:"))
    assert "0 code cells ran: no reply held a ```python block" in cells


def test_the_summary_counts_the_cells_that_ran_and_names_the_layer(tmp_path: Path) -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        return repl(f"print({turn(messages)})") if turn(messages) < 2 else "FINAL(7)"

    code, out, _ = run_demo(tmp_path, policy)
    cells = next(line for line in out.splitlines() if line.startswith("cells:"))
    assert code == 0 and cells.startswith(
        "cells:        2 code cells ran in the REPL (model code ran isolated: "
    )


def test_ask_json_names_the_model_and_the_cells(tmp_path: Path) -> None:
    context = tmp_path / "c.txt"
    context.write_text("alpha beta\n")

    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        return repl("print(len(context))") if turn(messages) == 0 else "FINAL(ok)"

    with ScriptedServer(policy) as srv:
        proc = subprocess.run(
            [*ASK, "--context", str(context), "--base-url", srv.url],
            capture_output=True,
            text=True,
            timeout=120,
        )
    result = json.loads(proc.stdout)
    assert proc.returncode == 0 and result["model"] == "openai:scripted" and result["cells"] == 1


def test_the_embedded_model_is_needed_only_when_nothing_is_configured(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.chdir(tmp_path)  # no ./rlmx.toml
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "RLMX_MODEL", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert demo.needs_embedded_model([], NO_KEYS)
    assert not demo.needs_embedded_model(["--model", "openai:gpt-5-mini"], NO_KEYS)
    assert not demo.needs_embedded_model(["--model=openai:gpt-5-mini"], NO_KEYS)
    assert not demo.needs_embedded_model([], {**NO_KEYS, "RLMX_MODEL": "openai:gpt-5-mini"})
    assert not demo.needs_embedded_model([], {**NO_KEYS, "OPENAI_API_KEY": "sk-x"})
    config = tmp_path / "my.toml"
    config.write_text('model = "openai:gpt-5-mini"\n')
    assert not demo.needs_embedded_model(["--config", str(config)], NO_KEYS)
    assert not demo.needs_embedded_model(["--config", str(tmp_path / "missing.toml")], NO_KEYS)


def test_a_limit_with_no_answer_is_the_model_s_failure_not_the_demo_s(tmp_path: Path) -> None:
    def no_answer(messages: list[dict[str, Any]], request: Any) -> str:
        return repl("x = 1")  # code every turn, and code again when asked for the final answer

    code, out, err = run_demo(tmp_path, no_answer, "--max-iterations", "2")
    assert code == 0 and "rlmx answer:  (none)" in out
    assert "max_iterations limit reached after 2 turn(s) (rlmx exit 1)" in out
    assert "demo: rlmx worked, but the model gave no answer before the max_iterations limit" in err
