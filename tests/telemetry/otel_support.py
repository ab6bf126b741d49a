"""What the telemetry tests share: the SDK's presence (under CI=true its absence fails) and the API's
global tracer provider, set per test."""

from __future__ import annotations

import os
from typing import Any

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"


def need_sdk() -> None:
    """The SDK (the `otel` extra); under CI its absence fails the test."""
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        if IN_CI:
            pytest.fail(f"the otel extra is not installed: {exc}")
        pytest.skip(f"the otel extra is not installed: {exc}")


def set_global_provider(provider: Any) -> None:
    """The API sets its global provider once per process; the tests set it per test (its own tests do
    the same through these two module attributes)."""
    from opentelemetry import trace
    from opentelemetry.util._once import Once

    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    if provider is not None:
        trace.set_tracer_provider(provider)
