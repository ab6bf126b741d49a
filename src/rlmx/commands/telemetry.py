"""`--otel` and the config's `[telemetry]` table: the SDK and its OTLP exporter, set up by the commands
that run (rlmx.telemetry.sdk), never by the library."""

from __future__ import annotations

import os
from typing import Any


def start_telemetry(flag: bool, config_file: Any = None) -> bool:
    """Set the SDK up when `--otel` is given or the config says `[telemetry] otel = true`; the config's
    `capture_content = true` turns the prompt/reply opt-in on unless its variable is set. True: set up."""
    from rlmx.config import load_config
    from rlmx.telemetry.attributes import CAPTURE_ENV

    table = load_config(str(config_file) if config_file else None).telemetry
    if not (flag or table.get("otel")):
        return False
    if table.get("capture_content"):
        os.environ.setdefault(CAPTURE_ENV, "true")
    from rlmx.telemetry import sdk

    return sdk.start()
