"""The DSPy interpreters share zygotes for the life of the process: each module stops them when it ends,
so later tests that count this process's children (the sandbox and session suites) find none of them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="module")
def _stop_the_shared_zygotes() -> Iterator[None]:
    yield
    from rlmx.integrations.dspy import close_runtime

    close_runtime()
