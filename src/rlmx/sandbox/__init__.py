"""Where model-written code runs: isolation, the zygote and its workers, the wire between them and the
host. `open_sandboxes(settings)` gives a run its sandboxes. Kept import-light: the worker imports this
package."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlmx.sandbox.base import SandboxFactory, SandboxSettings


def open_sandboxes(settings: SandboxSettings) -> SandboxFactory:
    """The sandboxes of one run: the process backends share a zygote; "local" is UNSAFE.
    `settings.backend` is one of `BACKENDS`: `SandboxSettings` refuses any other."""
    if settings.backend == "local":
        from rlmx.sandbox.in_process import InProcessSandboxes

        return InProcessSandboxes(settings)
    from rlmx.sandbox.process import ProcessSandboxes

    return ProcessSandboxes(settings)
