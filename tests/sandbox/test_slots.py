"""Worker slots (rlmx.sandbox.confine): a worker without a uid of its own leaves no lock file behind."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rlmx.sandbox import confine


def plan(state: Path, *, per_worker_uid: bool = False) -> Any:
    return SimpleNamespace(
        per_worker_uid=per_worker_uid, state_dir=str(state), uid_first=1_900_000_000, uid_count=10
    )


def test_a_released_slot_takes_its_scratch_and_lock_file_with_it(tmp_path: Path) -> None:
    slots = [confine.acquire_slot(plan(tmp_path)) for _ in range(3)]
    assert len(os.listdir(tmp_path)) == 6  # three scratch directories and their lock files
    for slot in slots:
        os.rmdir(slot.scratch)  # what the monitor does first (shutil.rmtree)
        confine.release_slot(slot)
        os.close(slot.lock_fd)
    assert os.listdir(tmp_path) == []


def test_sweeping_removes_unheld_worker_lock_files_and_keeps_held_ones(tmp_path: Path) -> None:
    """Lock files an older rlmx left (808 of them piled up on a test machine) go at the next sweep."""
    for i in range(5):
        (tmp_path / f"w123-{i:x}.lock").touch()
    (tmp_path / "u1900000000.lock").touch()  # a uid's lock file stays: the next worker reuses it
    held = confine.acquire_slot(plan(tmp_path))
    os.rmdir(held.scratch)  # held and without a directory: mid-acquire, never swept
    confine.sweep_stale(plan(tmp_path))
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["u1900000000.lock", os.path.basename(held.scratch) + ".lock"]
    )
    os.close(held.lock_fd)
