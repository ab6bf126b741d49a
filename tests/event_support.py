"""Reading a run's events in tests: its code cells, its tool calls, what a cell printed."""

from __future__ import annotations

from rlmx.trace.events import Event, Exec, ToolCall


def cells(events: list[Event]) -> list[Exec]:
    return [e for e in events if isinstance(e, Exec)]


def tool_calls(events: list[Event]) -> list[ToolCall]:
    return [e for e in events if isinstance(e, ToolCall)]


def output_of(events: list[Event], index: int = 0) -> str:
    """The cell's printed text and its error, one after the other."""
    cell = cells(events)[index]
    return str((cell.output or {}).get("text", "")) + "\n" + (cell.error or "")
