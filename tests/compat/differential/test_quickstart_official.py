"""The official repository's examples/quickstart.py (v0.1.3, kept in data/ under its MIT licence) runs
unchanged under `rlms` 0.1.3 and, with only its import lines changed, under `rlmx.compat.rlms`, both
against a scripted server: the same answer, the same requests, a JSONL log in ./logs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from diff_harness import HERE, OBSERVED, Observation, message_skeleton, side_command
from diff_kit import answer, repl
from diff_policies import Script, kind_of
from test_differential import check_fields

from rlmx.testing import ScriptedServer

pytestmark = pytest.mark.peers

QUICKSTART = HERE / "data" / "quickstart.py.txt"
IMPORTS = {  # the only lines changed for the rlmx side
    "from rlm import RLM": "from rlmx.compat.rlms import RLM",
    "from rlm.logger import RLMLogger": "from rlmx.compat.rlms.logger import RLMLogger",
}


def for_side(side: str) -> str:
    source = QUICKSTART.read_text()
    if side == "official":
        return source
    out = source
    for old, new in IMPORTS.items():
        out = re.sub(rf"^{re.escape(old)}$", new, out, count=1, flags=re.M)
    changed = [a for a, b in zip(source.splitlines(), out.splitlines(), strict=True) if a != b]
    assert changed == list(IMPORTS), f"expected to change exactly the import lines, changed {changed}"
    return out


def run_quickstart(side: str, tmp: Path) -> tuple[subprocess.CompletedProcess[str], Observation]:
    tmp.mkdir(parents=True)
    (tmp / "quickstart.py").write_text(for_side(side))
    script = Script(
        root=[
            repl("import re", "m = re.search(r'SECRET_NUMBER=(\\d+)', context)", "print(m.group(0))"),
            repl(*answer("m.group(1)")),
        ]
    )
    cmd, env = side_command(side)
    with ScriptedServer(script) as srv:
        env |= {"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": srv.url, "NO_COLOR": "1", "TERM": "dumb"}
        proc = subprocess.run(
            [*cmd, "quickstart.py"], cwd=tmp, env=env, capture_output=True, text=True, timeout=300
        )
        requests = [
            {"kind": kind_of(r.messages, None), "messages": [message_skeleton(m) for m in r.messages]}
            for r in srv.requests
        ]
    found = re.search(r"^Correct: (.*)$", proc.stdout, re.M)
    note = (
        f"quickstart.py prints 'Correct: {found.group(1)}'" if found else "quickstart.py: no verdict printed"
    )
    return proc, Observation(side, None, requests, note=note)


def test_quickstart_runs_with_only_its_imports_changed(
    official_python: Path, compat_python: str, tmp_path: Path
) -> None:
    runs = {side: run_quickstart(side, tmp_path / side) for side in ("official", "compat")}
    OBSERVED["quickstart"] = (runs["official"][1], runs["compat"][1])
    for side, (proc, _) in runs.items():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        assert proc.returncode == 0, f"{side}: quickstart.py exited {proc.returncode}:\n{tail}"
        assert "Correct: True" in proc.stdout, f"{side}: {tail}"
        logs = list((tmp_path / side / "logs").glob("*.jsonl"))
        assert len(logs) == 1 and logs[0].stat().st_size > 0, f"{side}: no JSONL log in ./logs: {logs}"
    assert [r["kind"] for r in runs["official"][1].requests] == ["root", "root"]
    check_fields("quickstart", runs["official"][1], runs["compat"][1])
