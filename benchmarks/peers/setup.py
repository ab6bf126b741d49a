"""Create the peers' virtual environments (benchmark-only; never project dependencies).

    .venv/bin/python benchmarks/peers/setup.py        # creates benchmarks/.venvs/{official,dspy,phoenix}

official: `rlms==0.1.3` (the official RLM); dspy: `dspy[deno]==3.4.1`; phoenix: `arize-phoenix==20.26.1`
(an OTLP receiver with a span API, for the telemetry tests). Idempotent: an environment whose
package already imports is left alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

VENVS = Path(__file__).resolve().parent.parent / ".venvs"
PEERS = {
    "official": (["rlms==0.1.3"], "rlm"),
    "dspy": (["dspy[deno]==3.4.1"], "dspy"),
    # the real OTLP receiver of the telemetry tests (tests/telemetry/test_otlp_phoenix.py)
    "phoenix": (["arize-phoenix==20.26.1"], "phoenix"),
}


def python_of(name: str) -> Path:
    return VENVS / name / "bin" / "python"


def ready(name: str) -> bool:
    python = python_of(name)
    module = PEERS[name][1]
    return (
        python.exists()
        and subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0
    )


def setup(name: str) -> None:
    if ready(name):
        print(f"{name}: ready ({python_of(name)})")
        return
    packages, _ = PEERS[name]
    print(f"{name}: creating {VENVS / name} and installing {' '.join(packages)} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENVS / name)], check=True)
    subprocess.run([python_of(name), "-m", "pip", "install", "-q", *packages], check=True)
    print(f"{name}: ready" if ready(name) else f"{name}: installed, but `import {PEERS[name][1]}` fails")


if __name__ == "__main__":
    for peer in sys.argv[1:] or list(PEERS):
        setup(peer)
