"""DSPy for the integration tests: the version this process imports, or a pinned release installed into a
folder of its own (a pip `--target` directory, put first on PYTHONPATH) for a test to run against.

A release is installed once per machine, under RLMX_PEERS_DIR (default ~/.cache/rlmx/peers): DSPy itself
without its dependencies, then those of its requirements this interpreter does not already satisfy."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

DSPY_RELEASES = ("3.3.1", "3.4.1")  # the oldest supported release and the latest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def peers_dir() -> Path:
    return Path(os.environ.get("RLMX_PEERS_DIR") or Path.home() / ".cache" / "rlmx" / "peers")


def imports_dspy(target: Path, version: str) -> bool:
    code = f"import dspy, sys; sys.exit(dspy.__version__ != {version!r})"
    env = {**os.environ, "PYTHONPATH": str(target)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True).returncode == 0


def _pip(target: Path, *args: str) -> None:
    command = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target"]
    done = subprocess.run([*command, str(target), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(args)} failed: {done.stderr.strip()[-600:]}")


def _unsatisfied(target: Path, version: str) -> list[str]:
    """DSPy's requirements (no extras) that neither this interpreter nor the target folder satisfies."""
    from packaging.requirements import Requirement

    dist = next(metadata.distributions(path=[str(target)], name="dspy"))
    missing = []
    for line in dist.requires or []:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        found = [
            d.version
            for d in metadata.distributions(path=[str(target), *sys.path])
            if re.sub(r"[-_.]+", "-", d.metadata["Name"] or "").lower()
            == re.sub(r"[-_.]+", "-", requirement.name).lower()
        ]
        if not any(requirement.specifier.contains(v, prereleases=True) for v in found):
            missing.append(str(requirement))
    return missing


def install_dspy(version: str) -> Path:
    """The folder holding DSPy `version`, installed there first if needed (RuntimeError if it cannot be)."""
    target = peers_dir() / f"dspy-{version}"
    if imports_dspy(target, version):
        return target
    target.mkdir(parents=True, exist_ok=True)
    _pip(target, "--no-deps", f"dspy=={version}")
    missing = _unsatisfied(target, version)
    if missing:
        _pip(target, "--no-deps", *missing)
    if not imports_dspy(target, version):
        _pip(target, f"dspy=={version}")  # a dependency of a dependency was missing: the full set
    if not imports_dspy(target, version):
        raise RuntimeError(f"dspy=={version} was installed into {target} but does not import")
    return target


def dspy_or_skip() -> None:
    """Import DSPy here; where it is missing, skip -- except under CI=true, where that fails."""
    try:
        import dspy  # noqa: F401
    except ImportError as exc:
        if in_ci():
            pytest.fail(f"CI=true: DSPy must be installed for these tests (pip install 'rlmx[dspy]'): {exc}")
        pytest.skip(f"DSPy is not installed (pip install 'rlmx[dspy]'): {exc}", allow_module_level=True)
