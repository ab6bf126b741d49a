"""Choosing a sandbox backend by name. `open_sandboxes(settings)` gives a run its sandboxes."""

from __future__ import annotations

from rlmx.errors import ConfigError
from rlmx.sandbox.base import BACKENDS, SandboxFactory, SandboxSettings


def open_sandboxes(settings: SandboxSettings) -> SandboxFactory:
    """The sandboxes of one run: "process" and "process-unisolated" share a zygote; "local" is UNSAFE."""
    if settings.backend in ("process", "process-unisolated"):
        from rlmx.sandbox.process import ProcessSandboxes

        return ProcessSandboxes(settings)
    if settings.backend == "local":
        from rlmx.sandbox.local import LocalSandboxes

        return LocalSandboxes(settings)
    raise ConfigError(f"unknown sandbox backend {settings.backend!r}; use one of: {', '.join(BACKENDS)}")
