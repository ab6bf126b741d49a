"""The message skeletons of one scripted run through the official RLM (`rlms`) and through rlmx with
`prompt="official"`, side by side: roles, the turn messages and the feedback's framing (each message's
first line). A look for a person, not a test: it asserts nothing.

    .venv/bin/python benchmarks/peers/setup.py        # once: benchmarks/.venvs/official (rlms 0.1.3)
    .venv/bin/python benchmarks/peers/skeletons.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rlmx import RLM, Limits, ModelOptions  # noqa: E402
from rlmx.testing import ScriptedServer  # noqa: E402

OFFICIAL_PYTHON = ROOT / "benchmarks" / ".venvs" / "official" / "bin" / "python"
CONTEXT = "alpha\nbeta 7\ngamma\n" * 50
TURNS = [
    "Let me look.\n```repl\nprint(type(context), len(context))\nnotes = context[:40]\n```",
    "Now answer.\n```repl\nanswer['content'] = 'seven'\nanswer['ready'] = True\n```",
]


def policy(messages: list[dict[str, Any]], request: Any) -> str:
    """Root turns play TURNS by the number of assistant messages so far; anything else is a sub-call."""
    if messages and messages[0]["role"] == "system":  # both frameworks open their root turns with one
        done = sum(1 for m in messages if m["role"] == "assistant")
        return TURNS[min(done, len(TURNS) - 1)]
    return "sub reply"


def skeleton(messages: list[dict[str, Any]]) -> list[str]:
    rows = []
    for message in messages:
        text = str(message.get("content", ""))
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        rows.append(f"{message['role']:9} {first[:70]}")
    return rows


def last_root_messages(srv: ScriptedServer) -> list[dict[str, Any]]:
    roots = [r for r in srv.requests if r.messages and r.messages[0]["role"] == "system"]
    return roots[-1].messages


def through_official() -> list[str] | str:
    if not OFFICIAL_PYTHON.exists():
        return "benchmarks/.venvs/official is missing: run benchmarks/peers/setup.py first"
    with ScriptedServer(policy) as srv, tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp) / "context.txt"
        context.write_text(CONTEXT)
        spec = {
            "url": srv.url,
            "context_file": str(context),
            "question": "What is the number?",
            "max_iterations": 5,
        }
        subprocess.run(
            [
                str(OFFICIAL_PYTHON),
                str(ROOT / "benchmarks" / "peers" / "official_driver.py"),
                json.dumps(spec),
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return skeleton(last_root_messages(srv))


def through_rlmx() -> list[str]:
    with ScriptedServer(policy) as srv:
        RLM(
            "openai:scripted",
            model_options=ModelOptions(base_url=srv.url),
            limits=Limits(max_iterations=5),
            prompt="official",
            trace=False,
        ).run("What is the number?", CONTEXT)
        return skeleton(last_root_messages(srv))


def main() -> None:
    official, ours = through_official(), through_rlmx()
    if isinstance(official, str):
        print(official)
        official = []
    width = 82
    print(f"{'official rlms 0.1.3':{width}} | rlmx --prompt official")
    print("-" * width + "-+-" + "-" * width)
    for index in range(max(len(official), len(ours))):
        left = official[index] if index < len(official) else ""
        right = ours[index] if index < len(ours) else ""
        print(f"{left:{width}.{width}} | {right:.{width}}")


if __name__ == "__main__":
    main()
