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
    """Every test running now (several under pytest-xdist: its workers report to this process) with when
    it started and when it is next said to be running. Writes to the terminal pytest itself writes to:
    while a test runs, fd 1 is captured, so the line goes to the capture manager's saved copy of the
    original (pytest's own attribute; without capture, -s, through the reporter)."""

    def __init__(self, reporter: Any, capman: Any) -> None:
        self.reporter = reporter
        saved = getattr(
            getattr(getattr(capman, "_global_capturing", None), "out", None), "targetfd_save", None
        )
        self.out = os.fdopen(os.dup(saved), "w", encoding="utf-8") if isinstance(saved, int) else None
        self.lock = threading.Lock()
        self.running: dict[str, list[float]] = {}  # nodeid -> [started, next said at]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="rlmx-test-heartbeat", daemon=True)
        self.thread.start()

    def start(self, nodeid: str) -> None:
        with self.lock:
            now = time.monotonic()
            self.running[nodeid] = [now, now + HEARTBEAT_S]

    def finish(self, nodeid: str) -> None:
        with self.lock:
            self.running.pop(nodeid, None)

    def _beat(self) -> None:
        while not self.stopped.wait(1.0):
            now = time.monotonic()
            with self.lock:
                due = [(nodeid, times) for nodeid, times in self.running.items() if now >= times[1]]
                for nodeid, times in due:
                    times[1] += HEARTBEAT_S
                    self._say(f"[still running after {now - times[0]:.0f} s: {nodeid}]")

    def _say(self, line: str) -> None:
        if self.out is None:
            self.reporter.write_line(line, yellow=True)
        else:
            self.out.write(f"\n{line}\n")
            self.out.flush()


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    worker = hasattr(config, "workerinput")  # a pytest-xdist worker: its controller says it
    if HEARTBEAT_S > 0 and reporter is not None and not worker:
        config.stash[HEARTBEAT] = Heartbeat(reporter, config.pluginmanager.get_plugin("capturemanager"))


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    beat = _heartbeat()
    if beat is not None:
        beat.start(nodeid)


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    beat = _heartbeat()
    if beat is not None:
        beat.finish(nodeid)


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
