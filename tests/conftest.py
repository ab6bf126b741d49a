from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from rlmx.testing import forbid_real_providers

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for `examples.*`
sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `policies`

# the in-container half of tests/sandbox/test_container.py: collected only by the pytest that test starts
# under the container launcher (it asserts every one of them passed); elsewhere it is not a test at all
collect_ignore = [] if os.environ.get("RLMX_IN_CONTAINER") else ["sandbox/test_container_inside.py"]

forbid_real_providers()
for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "RLMX_MODEL"):
    os.environ.pop(key, None)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Default traces go to a per-test state dir, never the user's."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


# The slow groups (pyproject.toml's markers): ray_cluster, real_model and large are set by the modules
# themselves (`pytestmark`); `cli` is set here on every test of a module that runs the rlmx command
# line (or `rlmx serve` / `rlmx mcp`) as a subprocess, found by how such modules start it.
RUNS_THE_CLI = re.compile(r'"-m", "rlmx(\.cli)?"|RLMX = \[|"rlmx", "ask"|bin/rlmx|serve_helpers import')


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seen: dict[Path, bool] = {}
    for item in items:
        path = Path(str(item.fspath))
        if path not in seen:
            seen[path] = bool(RUNS_THE_CLI.search(path.read_text(encoding="utf-8")))
        if seen[path]:
            item.add_marker(pytest.mark.cli)


def pytest_configure(config: pytest.Config) -> None:
    """The heartbeat (tests/heartbeat.py) in every run of this suite."""
    import heartbeat

    if not config.pluginmanager.is_registered(heartbeat):
        config.pluginmanager.register(heartbeat, "rlmx-heartbeat")
