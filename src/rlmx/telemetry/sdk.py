"""The OpenTelemetry SDK and an OTLP exporter, set up for the `rlmx` commands when asked (never by the
library on its own). The standard variables decide: `OTEL_EXPORTER_OTLP_ENDPOINT` /
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `..._HEADERS`, `OTEL_EXPORTER_OTLP_PROTOCOL` /
`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` (`http/protobuf`, the default, or `grpc`), `OTEL_SERVICE_NAME`
(default `rlmx`), `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_EXPORTER` (`otlp`, the default; `console`: the
spans as JSON on stderr; `none`); `OTEL_SDK_DISABLED=true` turns it all off."""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Mapping
from typing import Any

from rlmx.errors import ConfigError

PROTOCOLS = ("http/protobuf", "grpc")
_lock = threading.Lock()
_provider: Any = None


def disabled(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def protocol(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    chosen = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or PROTOCOLS[0]
    ).strip()
    if chosen not in PROTOCOLS:
        raise ConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={chosen} is not one rlmx exports with; use one of {', '.join(PROTOCOLS)}"
        )
    return chosen


def exporter(environ: Mapping[str, str] | None = None) -> Any:
    """The span exporter the variables ask for; the OTLP one reads its endpoint and headers itself."""
    env = os.environ if environ is None else environ
    kind = (env.get("OTEL_TRACES_EXPORTER") or "otlp").strip().lower()
    if kind == "console":
        import sys

        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)
    if kind != "otlp":
        raise ConfigError(
            f"OTEL_TRACES_EXPORTER={kind} is not one rlmx exports with; use otlp, console or none"
        )
    try:
        if protocol(environ) == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
                OTLPSpanExporter,
            )
    except ImportError as exc:
        raise missing(exc) from exc
    return OTLPSpanExporter()


def missing(exc: ImportError) -> ConfigError:
    name = getattr(exc, "name", None) or "opentelemetry-sdk"
    return ConfigError(
        f"`otel` needs the OpenTelemetry SDK and OTLP exporters ({name} is not installed): "
        "pip install 'rlmx[otel]'"
    )


def start(environ: Mapping[str, str] | None = None) -> bool:
    """The SDK's tracer provider with a batching OTLP exporter, set as the global one and shut down (so
    flushed) at exit. False, and nothing set up, under OTEL_SDK_DISABLED=true or when the process
    already has a tracer provider (an application's, `opentelemetry-instrument`'s). Idempotent."""
    global _provider
    env = os.environ if environ is None else environ
    if disabled(environ) or (env.get("OTEL_TRACES_EXPORTER") or "").strip().lower() == "none":
        return False
    with _lock:
        if _provider is not None:
            return True
        from rlmx.telemetry import active

        if active():
            return False
        try:
            from opentelemetry import trace
            from opentelemetry.sdk.resources import SERVICE_NAME, Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            raise missing(exc) from exc
        resource = Resource.create({} if env.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: "rlmx"})
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(exporter(environ)))
        trace.set_tracer_provider(provider)
        _provider = provider
        atexit.register(shutdown)
        return True


def started() -> bool:
    """This process set the SDK up through `start`."""
    return _provider is not None


def flush(timeout_s: float = 10.0) -> None:
    """Export what is buffered now (a command about to exit, a batch item that ended)."""
    if _provider is not None:
        _provider.force_flush(int(timeout_s * 1000))


def shutdown() -> None:
    global _provider
    with _lock:
        provider, _provider = _provider, None
    if provider is not None:
        provider.shutdown()
