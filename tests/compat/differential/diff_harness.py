"""Run a scenario through the official `rlms` 0.1.3 and through `rlmx.compat.rlms`, each against its
own scripted server over HTTP, and observe both the same way.

The official side runs in its own virtual environment (benchmarks/.venvs/official, made by
benchmarks/peers/setup.py); the rlmx side runs with the repository's `src` first on PYTHONPATH, or
RLMX_COMPAT_SRC's when that is set (for trying another checkout's compat layer).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diff_kit import Scenario
from diff_policies import first_line, kind_of

from rlmx.testing import ScriptedServer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
DRIVER = HERE / "diff_driver.py"
SETUP = ROOT / "benchmarks" / "peers" / "setup.py"
OFFICIAL_PYTHON = ROOT / "benchmarks" / ".venvs" / "official" / "bin" / "python"
SIDES = ("official", "compat")
CUT = re.compile(r"\.\.\. \+ \[(\d+) chars\.\.\.\]")  # the official's mark of a block output cut at 20,000
ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*$")


def compat_src() -> Path:
    return Path(os.environ.get("RLMX_COMPAT_SRC") or ROOT / "src").resolve()


def ensure_official_env() -> Path:
    """The official environment, created on first use (idempotent); raises RuntimeError when it cannot be."""
    proc = subprocess.run(
        [sys.executable, str(SETUP), "official"], capture_output=True, text=True, timeout=900, cwd=ROOT
    )
    ok = proc.returncode == 0 and OFFICIAL_PYTHON.exists()
    check = (
        subprocess.run([str(OFFICIAL_PYTHON), "-c", "import rlm, dotenv"], capture_output=True)
        if ok
        else None
    )
    if not ok or check is None or check.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        raise RuntimeError(f"could not create the official rlms 0.1.3 environment with {SETUP}: {tail}")
    return OFFICIAL_PYTHON


def side_command(side: str) -> tuple[list[str], dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PYTHONPATH"))}
    env["RLMX_DIFF_SIDE"] = side
    if side == "official":
        return [str(OFFICIAL_PYTHON)], env
    env["PYTHONPATH"] = str(compat_src())
    return [sys.executable], env


def message_skeleton(message: dict[str, Any]) -> list[str]:
    """[role, line, ...]: what a message is made of, without the words that are each side's own.

    The system prompt is reduced to its role; an assistant message (the script's own text) is kept
    whole; REPL feedback to its block headers, `Type: message` error lines, `REPL variables:` line
    and the official's mark of an output cut at 20,000 characters; any other user message to the first
    line of each of its paragraphs.
    """
    role, text = message["role"], str(message.get("content", ""))
    if role == "system":
        return [role, "<system prompt>"]
    if role != "user":  # the script's own reply (or the runtime's one-line final ask): all of it
        return [role, text.strip()[:500]]
    lines = [line.strip() for line in text.splitlines()]
    if first_line(text).startswith("REPL output"):
        keep = [
            line
            for line in lines
            if line.startswith(("REPL output", "REPL variables:")) or ERROR_LINE.match(line)
        ]
        cuts = [f"<cut: {n} characters>" for n in CUT.findall(text)]
        return [role, *keep, *cuts]
    starts = [line for i, line in enumerate(lines) if line and (i == 0 or not lines[i - 1])]
    return [role, *starts]


def request_skeleton(req: Any, marker: str | None, keep_system: bool = False) -> dict[str, Any]:
    """What one request was: its kind (diff_policies.kind_of), its body's parameters besides the
    messages (model, sampling), and each message's skeleton (the system prompt's text too when the
    scenario gave it, `keep_system`)."""
    messages = [message_skeleton(m) for m in req.messages]
    if keep_system:
        messages = [
            [m["role"], m["content"]] if m["role"] == "system" else s
            for m, s in zip(req.messages, messages, strict=True)
        ]
    params = {k: v for k, v in (req.body or {}).items() if k != "messages"}
    return {"kind": kind_of(req.messages, marker), "params": params, "messages": messages}


def in_canonical_order(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs of consecutive plain calls and child turns (a batch, sent concurrently) sorted, so their
    arrival order does not count."""
    out: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []
    for req in [*requests, None]:
        if req is not None and req["kind"] in ("sub", "child"):
            run.append(req)
            continue
        out += sorted(run, key=repr)
        run = []
        if req is not None:
            out.append(req)
    return out


@dataclass
class Observation:
    side: str
    result: dict[str, Any] | None  # the driver's JSON, None when it crashed
    requests: list[dict[str, Any]]
    crash: str | None = None
    note: str | None = None  # what the table shows for a run without the driver's record (the quickstart)


OBSERVED: dict[str, tuple[Observation, Observation]] = {}  # scenario -> (official, compat), for the table


def interrupter(pid_file: Path, at: int) -> Callable[[int], None]:
    """A root-turn hook that sends the driver SIGINT (a user's Ctrl-C) when turn `at` is asked for,
    then holds the reply back long enough for the interrupt to land first."""

    def hook(index: int) -> None:
        if index == at:
            os.kill(int(pid_file.read_text()), signal.SIGINT)
            time.sleep(2.0)

    return hook


def run_side(side: str, scenario: Scenario, workdir: Path) -> Observation:
    workdir.mkdir(parents=True, exist_ok=True)
    script = scenario.script()
    if scenario.interrupt_at_root is not None:
        script.on_root = interrupter(workdir / "driver.pid", scenario.interrupt_at_root)
    with ScriptedServer(script) as srv:
        spec = {
            "url": srv.url,
            "rlm": scenario.rlm_kwargs(),
            "calls": scenario.calls,
            "tools": scenario.tools,
            "logger": scenario.logger,
            "log_dir": str(workdir / "logs") if scenario.logger == "dir" else None,
            "callbacks": scenario.callbacks,
            "result_file": str(workdir / "result.json"),
            "pid_file": str(workdir / "driver.pid"),
        }
        spec_file = workdir / "scenario.json"
        spec_file.write_text(json.dumps(spec, indent=1))
        cmd, env = side_command(side)
        try:
            proc = subprocess.run(
                [*cmd, str(DRIVER), str(spec_file)],
                capture_output=True,
                text=True,
                timeout=scenario.timeout_s,
                env=env,
                cwd=workdir,
            )
            crash = None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["?"])[-1]
            (workdir / "stderr.txt").write_text(proc.stderr)
        except subprocess.TimeoutExpired:
            crash = f"the driver did not finish in {scenario.timeout_s:.0f} s"
        marker = script.root_marker if script.child is not None else None
        requests = [request_skeleton(r, marker, scenario.keep_system) for r in srv.requests]
    result_file = workdir / "result.json"
    result = json.loads(result_file.read_text()) if crash is None and result_file.exists() else None
    if result is not None and scenario.concurrent:
        result["events"] = sorted(result.get("events") or [], key=repr)
    return Observation(side, result, in_canonical_order(requests), crash)
