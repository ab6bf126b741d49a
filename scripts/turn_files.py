"""The rlmx source files whose code runs in one root turn: what a newcomer reads to follow it.

    .venv/bin/python scripts/turn_files.py            # the count, then the files
    .venv/bin/python scripts/turn_files.py --sandbox process

One run of `RLM.run` (a scripted model in this process: one turn with a code block, then FINAL) is
traced with `sys.setprofile` after a first, untraced run has imported everything; every function call
whose code lives under `src/rlmx` marks its file. Construction (`RLM(...)`) is traced too, since a
reader starts there; module bodies (imports) are not. With `--sandbox process` the worker's side
runs in another process and is not seen: the default, `local`, runs the REPL in this one, so its files
count (rlmx/repl, the worker's cell runner)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parent.parent / "src" / "rlmx"


def traced_files(sandbox: str) -> list[str]:
    from rlmx import RLM, SandboxSettings
    from rlmx.testing import FunctionLM

    def one_run() -> Any:
        replies = iter(["```repl\nprint(len(context))\n```", "FINAL(done)"])
        lm = FunctionLM(lambda messages, settings: next(replies))
        rlm = RLM(lm, trace=False, sandbox=SandboxSettings(sandbox))
        return rlm.run("How long is the context?", "some text " * 100)

    one_run()  # every module imported: only what runs is seen below, not module bodies
    seen: set[str] = set()
    root = str(SRC)

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(root):
            seen.add(frame.f_code.co_filename)

    sys.setprofile(profile)
    try:
        result = one_run()
    finally:
        sys.setprofile(None)
    assert result.answer == "done", result
    return sorted(str(Path(name).relative_to(SRC.parent)) for name in seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandbox", default="local", choices=("local", "process", "process-unisolated"))
    args = parser.parse_args()
    files = traced_files(args.sandbox)
    print(f"{len(files)} files ({args.sandbox} sandbox)")
    for name in files:
        print(f"  {name}")


if __name__ == "__main__":
    main()
