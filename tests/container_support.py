"""Helpers of the tests that run rlmx "in a container" (tests/sandbox/test_container.py): the launcher's
command line (`rlmx.testing.container`), and an interpreter an unprivileged uid can run.

This machine's Python lives under /root (0700): another uid cannot run it. `user_env()` builds, once
per content of the checkout (pyproject.toml and src/), a venv from Debian's `/usr/bin/python3` in a
world-readable directory under the temp dir, installs a copy of rlmx (not editable) with pytest into
it, and copies tests/ and examples/ next to it, so uid `NOBODY` can run the test suite there.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"
IN_CONTAINER_ENV = "RLMX_IN_CONTAINER"  # set for a pytest this module's tests start under the launcher


def launcher(*opts: str) -> list[str]:
    """The argv prefix that runs a command as in a container (see `rlmx.testing.container`)."""
    return [sys.executable, "-m", "rlmx.testing.container", *opts, "--"]


def content_key(*names: str) -> str:
    """A hash of the checkout's files under `names` (files or directories)."""
    digest = hashlib.sha256()
    for name in names:
        top = REPO / name
        for path in sorted([top] if top.is_file() else top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and ".egg-info" not in str(path):
                digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class UserEnv:
    """A venv and a copy of the checkout's tests, both readable (and runnable) by any uid."""

    base: Path
    python: Path  # the venv's interpreter
    repo: Path  # pyproject.toml, tests/, examples/ (rlmx itself is installed in the venv)
    built_s: float  # how long building it took in this session (0.0: an earlier build was reused)

    def python_command(self, *args: str) -> list[str]:
        """This interpreter with `args`, in an environment without the host venv's paths (the launcher
        before it still needs them: it runs from the host's Python)."""
        return [
            "/usr/bin/env",
            "-u",
            "PYTHONPATH",
            "-u",
            "VIRTUAL_ENV",
            f"HOME={self.base / 'home'}",
            f"PATH={self.python.parent}:/usr/local/bin:/usr/bin:/bin",
            str(self.python),
            *args,
        ]


IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".pytest_cache")


def _open_to_all(path: Path) -> None:
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                mode = os.stat(full).st_mode
                os.chmod(full, mode | 0o444 | (0o111 if mode & 0o111 or name in dirs else 0))
    os.chmod(path, 0o755)


def _run(step: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(step, capture_output=True, text=True, env=env, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(step[:4])} failed: {done.stderr.strip()[-2000:]}")


def _build(base: Path, make: Callable[[Path], None]) -> bool:
    """`make(base)` once, under a lock, unless an earlier build finished; True if it ran now."""
    lock = os.open(f"{base}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two sessions at once build it once
        if (base / "READY").exists():
            return False
        shutil.rmtree(base, ignore_errors=True)  # a build that was cut short
        base.mkdir(mode=0o755)
        make(base)
        _open_to_all(base)
        (base / "READY").write_text("")
        return True
    finally:
        os.close(lock)


def _make_venv(base: Path) -> None:
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "src", source / "src", ignore=IGNORE)
    _run([SYSTEM_PYTHON, "-m", "venv", str(base / "venv")])
    python = str(base / "venv" / "bin" / "python")
    _run([python, "-m", "pip", "install", "-q", str(source), "pytest>=8", "pytest-timeout>=2.3"])
    shutil.rmtree(source)  # only the installed copy is imported


def _make_tests(base: Path) -> None:
    repo = base / "repo"
    repo.mkdir()
    shutil.copy2(REPO / "pyproject.toml", repo / "pyproject.toml")
    for name in ("tests", "examples", "docs"):  # docs: the attack suite checks docs/security.md's table
        shutil.copytree(REPO / name, repo / name, ignore=IGNORE)
    (base / "home").mkdir()
    os.chmod(base / "home", 0o1777)


def user_env() -> UserEnv:
    """Build (or reuse) the venv for this checkout's pyproject.toml and src/, and the copy of its
    tests/ and examples/; see the module docstring."""
    tmp = Path(tempfile.gettempdir())
    started = time.monotonic()
    venv = tmp / f"rlmx-uservenv-{content_key('pyproject.toml', 'src')}"
    built = _build(venv, _make_venv)
    tests = tmp / f"rlmx-usertests-{content_key('pyproject.toml', 'tests', 'examples', 'docs')}"
    _build(tests, _make_tests)
    took = time.monotonic() - started if built else 0.0
    return UserEnv(tests, venv / "venv" / "bin" / "python", tests / "repo", took)
