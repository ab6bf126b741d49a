from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from rlmx.testing import forbid_real_providers

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for `examples.*`
sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `policies`

forbid_real_providers()
for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "RLMX_MODEL"):
    os.environ.pop(key, None)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Default traces go to a per-test state dir, never the user's."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
