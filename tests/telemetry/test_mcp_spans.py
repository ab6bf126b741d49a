"""An MCP server's tool called from model code is a span like a host tool's, naming the server and the
tool's own name (tests/mcp_client/servers/small.py over stdio)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from span_tree import check_mirrors, from_sdk

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "mcp_client"))
from mcp_support import repl, scripted_run, small


def test_an_mcp_call_is_an_execute_tool_span_naming_server_and_tool(exporter: Any) -> None:
    code = 'total = small_add(2, b=5)\nsame = mcp_call("small", "echo-text", text="z")'
    result, events, _ = scripted_run([repl(code), "FINAL_VAR(total)"], {"small": small()})
    assert result.answer == 7, result.error
    every = from_sdk(exporter.get_finished_spans())
    # the mcp SDK makes spans of its own ("MCP send tools/call add"), each a trace of its own: rlmx's
    # tool span is made from the call's record afterwards, so they cannot nest under it (docs/telemetry.md)
    spans = [s for s in every if not s.name.startswith("MCP ")]
    assert any(s.name == "MCP send tools/call add" for s in every)
    check_mirrors(spans, events)
    tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    named = [(s.name, s.attributes.get("rlmx.mcp.server"), s.attributes.get("rlmx.mcp.tool")) for s in tools]
    assert named == [
        ("execute_tool small_add", "small", "add"),
        ("execute_tool mcp_call", "small", "echo-text"),
    ]
    cell = next(s for s in spans if s.name == "rlmx cell")
    assert all(s.parent_id == cell.span_id for s in tools)
