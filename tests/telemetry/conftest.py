"""Fixtures of the telemetry tests: the application's tracer provider (the SDK's, with its in-memory
exporter), set as the global one for one test and taken away after it, so the rest of the suite runs
with no provider (as an application that never set one)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from otel_support import need_sdk, set_global_provider


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
