"""Fixtures of the differential tests: the official `rlms` 0.1.3 environment (made here, once) and the
rlmx side's `rlmx.compat.rlms` (the repository's own src, or RLMX_COMPAT_SRC); the table at the end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from diff_harness import OBSERVED, compat_src, ensure_official_env, side_command

IN_CI = os.environ.get("CI", "").lower() == "true"


@pytest.fixture(scope="session")
def official_python() -> Path:
    """benchmarks/.venvs/official with rlms 0.1.3 from PyPI; under CI a failure to make it fails."""
    try:
        return ensure_official_env()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        if IN_CI:
            pytest.fail(str(exc))
        pytest.skip(f"the official rlms environment is not available here: {exc}")


@pytest.fixture(scope="session")
def compat_python() -> str:
    """The interpreter that runs the rlmx side, once `rlmx.compat.rlms` imports from compat_src()."""
    cmd, env = side_command("compat")
    proc = subprocess.run(
        [*cmd, "-c", "from rlmx.compat.rlms import RLM; from rlmx.compat.rlms.logger import RLMLogger"],
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        pytest.fail(f"rlmx.compat.rlms does not import from {compat_src()}: {last}")
    return cmd[0]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not OBSERVED:
        return
    from table import documented, render

    text = render(OBSERVED) + "\n\n" + documented()
    terminalreporter.write_sep("-", "official rlms 0.1.3 beside rlmx.compat.rlms")
    terminalreporter.write_line(text)
    out = os.environ.get("RLMX_DIFF_TABLE")
    if out:
        Path(out).write_text(text + "\n")
