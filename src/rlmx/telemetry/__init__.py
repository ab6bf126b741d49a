"""OpenTelemetry traces of rlmx runs (docs/telemetry.md).

The library speaks only the OpenTelemetry API: a run gets a span sink when `opentelemetry-api` is
installed and the application has set a tracer provider (Logfire, Phoenix, its own SDK set-up), so
its spans join the application's traces; otherwise nothing is added and nothing is imported beyond
the check. `rlmx.telemetry.sdk` is what the `rlmx` commands use to set the SDK up when asked.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rlmx.telemetry.attributes import CAPTURE_ENV, SEMCONV_VERSION, capture_from_env

__all__ = ["CAPTURE_ENV", "SEMCONV_VERSION", "active", "run_sinks", "span_context"]


def active() -> bool:
    """A tracer provider is set (the API's default, a proxy with nothing behind it, does not count)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def run_sinks(capture_content: bool | None = None) -> list[Any]:
    """The sinks telemetry adds to a run: one `SpanSink` when `active()`, else none. `capture_content`
    None: from $OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT."""
    if not active():
        return []
    from rlmx.telemetry.spans import SpanSink

    capture = capture_from_env() if capture_content is None else capture_content
    return [SpanSink(capture_content=capture)]


@contextmanager
def span_context(name: str, attributes: dict[str, Any] | None = None, carrier: Any = None) -> Iterator[Any]:
    """A span made current around a block (a batch, a served request), when `active()`; `carrier`: W3C
    trace-context headers (`traceparent`) it continues. Yields the span, or None when inactive."""
    if not active():
        yield None
        return
    from opentelemetry import trace
    from opentelemetry.propagate import extract

    from rlmx.telemetry.attributes import SCHEMA_URL, clean, rlmx_version

    parent = extract(carrier) if carrier else None
    tracer = trace.get_tracer("rlmx", rlmx_version(), schema_url=SCHEMA_URL)
    with tracer.start_as_current_span(name, context=parent, attributes=clean(attributes or {})) as span:
        yield span


def carrier() -> dict[str, str]:
    """The current trace context as W3C headers (empty when inactive): what a worker continues."""
    if not active():
        return {}
    from opentelemetry.propagate import inject

    headers: dict[str, str] = {}
    inject(headers)
    return headers
