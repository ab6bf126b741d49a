"""The suite's heartbeat (tests/heartbeat.py): a long test says it is still running, on the terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def run_pytest(tmp_path: Path, beat: str, *extra: str) -> str:
    (tmp_path / "test_long.py").write_text("import time\n\ndef test_long():\n    time.sleep(2.6)\n")
    (tmp_path / "test_other.py").write_text("import time\n\ndef test_other():\n    time.sleep(2.6)\n")
    env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env["RLMX_TEST_HEARTBEAT_S"] = beat
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "heartbeat", *extra],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_a_long_test_says_it_is_still_running_though_its_output_is_captured(tmp_path: Path) -> None:
    out = run_pytest(tmp_path, "1", "test_long.py")
    assert "[still running after 2 s: test_long.py::test_long]" in out


def test_under_xdist_each_running_test_is_said_to_be_running(tmp_path: Path) -> None:
    out = run_pytest(tmp_path, "1", "-n", "2", "test_long.py", "test_other.py")
    assert "s: test_long.py::test_long]" in out and "s: test_other.py::test_other]" in out


def test_the_heartbeat_can_be_turned_off(tmp_path: Path) -> None:
    assert "still running" not in run_pytest(tmp_path, "0", "test_long.py")
