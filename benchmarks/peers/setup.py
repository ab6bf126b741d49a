"""Create the peers' virtual environments (benchmark-only; never project dependencies).

    .venv/bin/python benchmarks/peers/setup.py        # creates benchmarks/.venvs/{official,dspy,mcp-time,mcp-everything,phoenix}

official: `rlms==0.1.3` (the official RLM); dspy: `dspy[deno]==3.4.1`; mcp-time: `mcp-server-time`
(a real MCP server from PyPI, for tests/mcp_client); mcp-everything: the npm package
`@modelcontextprotocol/server-everything` (stdio and streamable HTTP) in benchmarks/.venvs/mcp-everything;
phoenix: `arize-phoenix==20.26.1` (an OTLP receiver with a span API, for the telemetry tests).
Idempotent: an environment whose package already imports (or runs) is left alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

VENVS = Path(__file__).resolve().parent.parent / ".venvs"
PEERS = {
    "official": (["rlms==0.1.3"], "rlm"),
    "dspy": (["dspy[deno]==3.4.1"], "dspy"),
    "mcp-time": (["mcp-server-time==2026.10.19"], "mcp_server_time"),
    # the real OTLP receiver of the telemetry tests (tests/telemetry/test_otlp_phoenix.py)
    "phoenix": (["arize-phoenix==20.26.1"], "phoenix"),
}
NPM = {"mcp-everything": "@modelcontextprotocol/server-everything@2026.8.31"}


def npm_bin(name: str, program: str) -> Path:
    return VENVS / name / "node_modules" / ".bin" / program


def setup_npm(name: str) -> None:
    folder = VENVS / name
    if (folder / "node_modules" / ".bin").is_dir() and any((folder / "node_modules" / ".bin").iterdir()):
        print(f"{name}: ready ({folder})")
        return
    folder.mkdir(parents=True, exist_ok=True)
    print(f"{name}: installing {NPM[name]} into {folder} ...", flush=True)
    subprocess.run(
        ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(folder), NPM[name]],
        check=True,
    )


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
    for peer in sys.argv[1:] or [*PEERS, *NPM]:
        setup_npm(peer) if peer in NPM else setup(peer)
