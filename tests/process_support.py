"""Waiting on a condition, and the live processes of a session: shared by the CLI tests that start
`rlmx` as a subprocess and check it leaves nothing behind."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def wait_until(check: Any, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def session_processes(sid: int) -> list[str]:
    """Live processes of session `sid` (field 6 of /proc/PID/stat), as "pid cmdline"."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z" and int(fields[3]) == sid:
                found.append(f"{entry.name} {(entry / 'cmdline').read_bytes()[:80]!r}")
        except (OSError, ValueError, IndexError):
            continue
    return found
