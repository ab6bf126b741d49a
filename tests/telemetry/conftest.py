"""Fixtures of the telemetry tests: the application's tracer provider (the SDK's, with its in-memory
exporter), set as the global one for one test and taken away after it, so the rest of the suite runs
with no provider (as an application that never set one)."""

from __future__ import annotations

import os
from collections.abc import Iterator
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


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The in-memory exporter behind the global tracer provider of this test."""
    need_sdk()
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    set_global_provider(provider)
    try:
        yield memory
    finally:
        set_global_provider(None)
        provider.shutdown()
