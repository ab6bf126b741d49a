"""Shared pieces of the MCP client tests: the own-SDK server's configuration and a scripted run."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

from event_support import cells, output_of, tool_calls
from rlmx import RLM, SandboxSettings
from rlmx.testing import ScriptedModel
from rlmx.trace.events import Event

__all__ = ["SMALL", "cells", "output_of", "repl", "scripted_run", "small", "tool_calls"]

SMALL = str(Path(__file__).resolve().parent / "servers" / "small.py")
FENCE = "`" * 3


def small(mode: str = "ok", **extra: Any) -> dict[str, Any]:
    """The `mcpServers` entry of tests/mcp_client/servers/small.py in `mode`, over stdio."""
    return {"command": sys.executable, "args": [SMALL, "stdio", mode], **extra}


def repl(code: str) -> str:
    return f"\n{FENCE}repl\n{textwrap.dedent(code).strip()}\n{FENCE}\n"


def scripted_run(
    turns: list[Any], servers: dict[str, Any], *, child: list[Any] | None = None, **settings: Any
) -> tuple[Any, list[Event], ScriptedModel]:
    model = ScriptedModel(root=turns, child=child, final="FINAL(forced)")
    events: list[Event] = []
    settings.setdefault("trace", False)
    settings.setdefault("sandbox", SandboxSettings(backend="process"))
    rlm = RLM(model.lm(), on_event=events.append, mcp_servers={"mcpServers": servers}, **settings)
    result = rlm.run("q", "some context")
    return result, events, model
