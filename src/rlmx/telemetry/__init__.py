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

__all__ = [
    "CAPTURE_ENV",
    "SEMCONV_VERSION",
    "active",
    "carrier_of",
    "close_span",
    "continued",
    "export_env",
    "open_span",
    "run_sinks",
    "span_context",
]


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


def open_span(name: str, attributes: dict[str, Any] | None = None) -> Any:
    """A span started under the current context but not made current (its work spans several steps of
    a generator or several processes); None when inactive. Ended by `close_span`."""
    if not active():
        return None
    from opentelemetry import trace

    from rlmx.telemetry.attributes import SCHEMA_URL, clean, rlmx_version

    tracer = trace.get_tracer("rlmx", rlmx_version(), schema_url=SCHEMA_URL)
    return tracer.start_span(name, attributes=clean(attributes or {}))


def carrier_of(span: Any) -> dict[str, str]:
    """W3C headers naming `span` as the parent (empty for None): what a batch item continues."""
    if span is None:
        return {}
    from opentelemetry import trace
    from opentelemetry.propagate import inject

    headers: dict[str, str] = {}
    inject(headers, context=trace.set_span_in_context(span))
    return headers


def close_span(span: Any, attributes: dict[str, Any] | None = None) -> None:
    if span is None:
        return
    from rlmx.telemetry.attributes import clean

    span.set_attributes(clean(attributes or {}))
    span.end()


@contextmanager
def continued(headers: Any) -> Iterator[None]:
    """The trace context of incoming W3C headers (`traceparent`, `tracestate`) made current around a
    block, when `active()` and the headers carry one (a served request's caller's span)."""
    if not active() or not headers or not headers.get("traceparent"):
        yield
        return
    from opentelemetry import context as otel_context
    from opentelemetry.propagate import extract

    token = otel_context.attach(extract(headers))
    try:
        yield
    finally:
        otel_context.detach(token)


EXPORT_ENV_PREFIXES = ("OTEL_EXPORTER_OTLP_", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", CAPTURE_ENV)


def export_env(environ: Any = None) -> dict[str, str]:
    """The OpenTelemetry variables a worker process needs to export as this one does (its headers may
    hold a backend's key: the ray executor seals them with the model keys)."""
    import os

    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if k.startswith(EXPORT_ENV_PREFIXES)}
