"""A pytest plugin: a test (or its fixtures: a Ray cluster, a llama.cpp server) that runs for long says
so every RLMX_TEST_HEARTBEAT_S seconds (default 30; 0 turns it off) on pytest's own terminal, so a long
test is never a silent gap. tests/conftest.py registers it; `pytest -p heartbeat` loads it elsewhere."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

HEARTBEAT_S = float(os.environ.get("RLMX_TEST_HEARTBEAT_S", "30") or 0)


class Heartbeat:
    """Writes to the terminal pytest itself writes to: while a test runs, fd 1 is captured, so the line
    goes to the capture manager's saved copy of the original (pytest's own attribute; without capture,
    -s, through the reporter)."""

    def __init__(self, reporter: Any, capman: Any) -> None:
        self.reporter = reporter
        saved = getattr(
            getattr(getattr(capman, "_global_capturing", None), "out", None), "targetfd_save", None
        )
        self.out = os.fdopen(os.dup(saved), "w", encoding="utf-8") if isinstance(saved, int) else None
        self.lock = threading.Lock()
        self.current: str | None = None
        self.since = self.next_at = 0.0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="rlmx-test-heartbeat", daemon=True)
        self.thread.start()

    def start(self, nodeid: str) -> None:
        with self.lock:
            self.current, self.since = nodeid, time.monotonic()
            self.next_at = self.since + HEARTBEAT_S

    def finish(self) -> None:
        with self.lock:
            self.current = None

    def _beat(self) -> None:
        while not self.stopped.wait(1.0):
            with self.lock:
                if self.current is None or time.monotonic() < self.next_at:
                    continue
                self.next_at += HEARTBEAT_S
                line = f"[still running after {time.monotonic() - self.since:.0f} s: {self.current}]"
                if self.out is None:
                    self.reporter.write_line(line, yellow=True)
                else:
                    self.out.write(f"\n{line}\n")
                    self.out.flush()


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if HEARTBEAT_S > 0 and reporter is not None:
        config.stash[HEARTBEAT] = Heartbeat(reporter, config.pluginmanager.get_plugin("capturemanager"))


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    beat = _heartbeat()
    if beat is not None:
        beat.start(nodeid)


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    beat = _heartbeat()
    if beat is not None:
        beat.finish()


def pytest_unconfigure(config: pytest.Config) -> None:
    beat = config.stash.get(HEARTBEAT, None)
    if beat is not None:
        beat.stopped.set()


HEARTBEAT = pytest.StashKey[Heartbeat]()
_CONFIG: list[pytest.Config] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG[:] = [session.config]


def _heartbeat() -> Heartbeat | None:
    return _CONFIG[0].stash.get(HEARTBEAT, None) if _CONFIG else None
