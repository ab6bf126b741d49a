"""The command line at its edges, as a user meets it: help that reads right, bad usage refused in one line
with exit 2, and the demo's exit code and output. Every `rlmx` case runs as a subprocess."""

from __future__ import annotations

import inspect
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from examples.support_tickets import demo
from examples.support_tickets.generate import generate

from policies import is_forced_final, is_root, repl, tickets_policy, turn
from rlmx.config import Config
from rlmx.errors import ConfigError
from rlmx.evals.registry import FAMILIES, IMAGE_FAMILIES
from rlmx.testing import Fault, ScriptedServer

RLMX = [sys.executable, "-m", "rlmx.cli"]


def rlmx(*args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([*RLMX, *args], capture_output=True, text=True, env=env, timeout=120)


def first_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_rlmx_alone_prints_the_help_and_succeeds() -> None:
    proc = rlmx()
    assert proc.returncode == 0 and proc.stderr == ""
    assert "Usage: rlmx [OPTIONS] COMMAND" in proc.stdout and "ask" in proc.stdout
    assert "Exit codes: 0 answered" in proc.stdout


@pytest.mark.parametrize("args", [["--help"], ["ask", "--help"], ["eval", "--help"], ["view", "--help"]])
def test_flags_read_as_flags_and_arguments_as_names(args: list[str]) -> None:
    proc = rlmx(*args)
    assert proc.returncode == 0 and proc.stderr == ""
    assert "<bool>" not in proc.stdout and "{" not in proc.stdout.split("Usage:", 1)[1].splitlines()[0]


def test_ask_help_names_the_question_and_shows_the_limits_defaults() -> None:
    out = rlmx("ask", "--help").stdout
    assert "Usage: rlmx ask [OPTIONS] QUESTION" in out
    for default in ("(default: 1)", "(default: 30)", "(default: 200)", "(default: 64)"):
        assert default in out, default
    assert "--json " in out and "--json <" not in out


SHARING = ("ask", "serve", "mcp", "eval")
# same flag, another meaning: eval's --concurrency counts items; the servers' own options say what they serve
NOT_SHARED = {
    "--concurrency",
    "--root",
    "--name",
    "--max-running",
    "--trace-dir",
    "--host",
    "--port",
    "--help",
}


def test_shared_options_are_declared_once_and_read_the_same_in_every_command() -> None:
    from typer.main import get_command

    from rlmx.cli import app
    from rlmx.commands import options

    group: Any = get_command(app)
    commands = {name: group.commands[name] for name in SHARING}
    aliases = {id(value): name for name, value in vars(options).items() if hasattr(value, "__metadata__")}
    declared: dict[str, dict[str, str]] = {}  # flag -> command -> the alias that declares it there
    helps: dict[str, dict[str, str]] = {}  # flag -> command -> its help as shown
    for command_name, command in commands.items():
        signature = inspect.signature(command.callback.__wrapped__, eval_str=True)
        for param in command.params:
            flag = param.opts[0]
            alias = aliases.get(id(signature.parameters[param.name].annotation), "")
            declared.setdefault(flag, {})[command_name] = alias
            helps.setdefault(flag, {})[command_name] = param.help or ""
    assert {command: declared["--max-depth"][command] for command in SHARING} == dict.fromkeys(
        SHARING, "MaxDepth"
    )
    assert len(set(helps["--max-depth"].values())) == 1
    assert "(default: 1)" in helps["--max-depth"]["ask"] and "{default}" not in helps["--max-depth"]["ask"]
    shared = {flag: by for flag, by in declared.items() if len(by) > 1 and flag not in NOT_SHARED}
    assert {"--model", "--sub-model", "--base-url", "--max-iterations", "--timeout", "--config"} <= set(
        shared
    )
    for flag, by in shared.items():
        assert len(set(by.values())) == 1 and "" not in by.values(), (flag, by)  # one alias, in options
        shown = {command: helps[flag][command] for command in by}
        if flag == "--max-llm-calls":  # the same text; each command's own default
            assert shown["eval"].endswith("(default: 1000).") and shown["ask"].endswith("(default: 200).")
            shown = {command: text.rpartition("(default:")[0] for command, text in shown.items()}
        assert len(set(shown.values())) == 1, (flag, shown)


def test_eval_help_points_to_the_family_list_which_names_every_family() -> None:
    assert "rlmx eval --list" in " ".join(rlmx("eval", "--help", columns=80).stdout.split())
    proc = rlmx("eval", "--list", columns=80)
    assert proc.returncode == 0 and proc.stderr == ""
    lines = proc.stdout.strip().splitlines()
    every = {**FAMILIES, **IMAGE_FAMILIES}
    assert [line.split()[0] for line in lines] == list(every) and "receipts" in every
    for line, fam in zip(lines, every.values(), strict=True):
        assert fam.description in line and f"variants: {', '.join(fam.variants)}" in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["ask"], "rlmx: error: Missing argument 'QUESTION'."),
        (["ask", "q", "--jsn"], "rlmx: error: No such option: --jsn"),
        (["nope"], "rlmx: error: No such command 'nope'."),
        (["ask", "q", "--concurrency", "0"], "rlmx: error: Invalid value for '--concurrency'"),
        (["eval", "--oracle", "--concurrency", "0"], "rlmx: error: Invalid value for '--concurrency'"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], expected: str) -> None:
    proc = rlmx(*args)
    assert proc.returncode == 2 and proc.stdout == ""
    line = first_error_line(proc)
    assert line.startswith(expected) and line.endswith("--help`)"), line


def test_concurrency_below_one_is_refused_from_a_config_file_and_the_library(tmp_path: Path) -> None:
    config = tmp_path / "rlmx.toml"
    config.write_text("[providers.openai]\nconcurrency = 0\n")
    proc = rlmx(
        "ask", "q", "--model", "openai:x", "--base-url", "http://127.0.0.1:9/v1", "--config", str(config)
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert "concurrency must be at least 1, got 0" in first_error_line(proc)
    with pytest.raises(ConfigError, match="concurrency must be at least 1"):
        Config().model_options("openai:x", concurrency=0)
    assert Config().model_options("openai:x", concurrency=3).concurrency == 3


def test_max_depth_above_the_ceiling_is_refused_before_any_call() -> None:
    with ScriptedServer(lambda m, r: "FINAL(done)") as srv:
        proc = rlmx("ask", "q", "--max-depth", "99", "--model", "openai:scripted", "--base-url", srv.url)
        served = srv.served
    assert proc.returncode == 2 and proc.stdout == "" and served == 0
    line = first_error_line(proc)
    assert line.startswith("rlmx: error:") and "max_depth must be <= 8" in line


def test_a_folder_as_the_trace_file_is_refused_at_parsing(tmp_path: Path) -> None:
    with ScriptedServer(lambda m, r: "FINAL(done)") as srv:
        proc = rlmx("ask", "q", "--trace", str(tmp_path), "--model", "openai:scripted", "--base-url", srv.url)
        served = srv.served
    assert proc.returncode == 2 and proc.stdout == "" and served == 0
    line = first_error_line(proc)
    assert line.startswith("rlmx: error: Invalid value for '--trace':") and "is a folder" in line


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "is not a JSONL trace (byte"),
        (b"\x1f\x8b\x08\x00" + bytes(range(256)), "is not a JSONL trace (byte"),
        (b"hello\nworld\n", "not a JSON trace record"),
        (None, "is a folder"),
    ],
)
def test_view_refuses_what_is_not_a_trace_in_one_line(
    tmp_path: Path, content: bytes | None, expected: str
) -> None:
    target = tmp_path / "thing.jsonl"
    if content is None:
        target.mkdir()
    else:
        target.write_bytes(content)
    proc = rlmx("view", str(target), "-o", str(tmp_path / "out.html"))
    assert proc.returncode == 2 and proc.stdout == ""
    line = first_error_line(proc)
    assert line.startswith("rlmx: error: ") and expected in line and str(target) in line


# --- the demo: its exit code says whether rlmx worked, not whether the model was right ---------------


def run_demo(tmp_path: Path, policy: Any, *extra: str, faults: Any = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with ScriptedServer(policy, faults=faults) as srv:
        args = ["--model", "openai:scripted", "--base-url", srv.url, "--no-trace", "--quiet", *extra]
        code = demo.run(args, out=out, err=err, folder=tmp_path)
    return code, out.getvalue(), err.getvalue()


GOLD = generate()[1]


def test_demo_succeeds_and_shows_both_answers_when_the_model_is_wrong(tmp_path: Path) -> None:
    code, out, err = run_demo(tmp_path, lambda m, r: "FINAL(7)" if is_root(r) else "x")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("question:") and lines[1] == f"gold answer:  {GOLD}"
    assert lines[2] == "rlmx answer:  7" and lines[3] == "verdict:      differs from the gold answer"
    assert "finished after 1 turn(s) (rlmx exit 0); model: openai:scripted" in lines[4]
    assert (
        f"the gold answer is {GOLD}" in err
        and json.loads((tmp_path / "gold.json").read_text())["answer"] == GOLD
    )


def test_demo_says_when_the_model_is_right(tmp_path: Path) -> None:
    code, out, _ = run_demo(tmp_path, tickets_policy)
    assert code == 0 and "verdict:      matches the gold answer" in out.splitlines()


def test_demo_succeeds_when_a_limit_stopped_the_run_first(tmp_path: Path) -> None:
    def policy(messages: list[dict[str, Any]], request: Any) -> str:
        return "FINAL(partial)" if is_forced_final(request) else repl(f"print({turn(messages)})")

    code, out, _ = run_demo(tmp_path, policy, "--max-iterations", "2")
    assert code == 0 and "rlmx answer:  partial" in out
    assert "max_iterations limit reached after 2 turn(s) (rlmx exit 3)" in out


def test_demo_fails_with_rlmx_s_code_when_rlmx_failed(tmp_path: Path) -> None:
    code, out, err = run_demo(tmp_path, lambda m, r: "x", faults=lambda r: Fault.status(403, message="no"))
    assert code == 1 and "demo: rlmx did not answer (exit 1)" in err
    assert (
        "rlmx answer:  (none)" in out and "run:          failed after 1 turn(s): model call failed" in out
    )  # what happened
    code, out, err = run_demo(tmp_path, lambda m, r: "x", "--max-depth", "99")
    assert code == 2 and out == "" and "demo: rlmx did not answer (exit 2)" in err


def test_demo_with_json_prints_one_object_with_the_gold(tmp_path: Path) -> None:
    code, out, err = run_demo(tmp_path, lambda m, r: "FINAL(7)" if is_root(r) else "x", "--json")
    assert code == 0 and len(out.splitlines()) == 1
    result = json.loads(out)
    assert result["gold"] == GOLD and result["answer"] == "7" and "gold answer:" in err


def test_the_embedded_model_is_called_a_demo() -> None:
    result = {
        "answer": "12",
        "stopped_by": "final",
        "iterations": 2,
        "usage": {"by_model": {"local:smollm2": {}}},
    }
    lines = demo.summary(result, 48)
    assert lines[0] == demo.EMBEDDED_NOTE and "unreliable" in demo.EMBEDDED_NOTE  # first: not missed
    assert demo.EMBEDDED_NOTE not in demo.summary({**result, "usage": {"by_model": {"openai:x": {}}}}, 48)
    assert demo.matches("There are 48 billing issues.", 48) and demo.matches(48, 48)
    assert not demo.matches("12345 and 48", 48) and not demo.matches(True, 48)


def test_version_names_rlmx_python_and_the_sandbox_layer_here() -> None:
    import platform

    from rlmx import __version__

    proc = rlmx("--version")
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line.startswith(f"rlmx {__version__} (Python {platform.python_version()}; model code: ")
    assert "namespaces" in line  # this host makes user namespaces
    simulated = subprocess.run(
        [sys.executable, "-m", "rlmx", "--version"],  # python -m rlmx: the same command line
        capture_output=True,
        text=True,
        env={**os.environ, "RLMX_SANDBOX_SIMULATE": "unavailable"},
        timeout=60,
    )
    assert simulated.returncode == 0, simulated.stderr
    assert (
        "model code: Landlock (ABI " in simulated.stdout
        and "user namespaces are not permitted" in simulated.stdout
    )
