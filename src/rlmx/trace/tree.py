"""The call tree of one run: RLMs, their turns, the code cells of a turn and what each cell started."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlmx.engine.ledger import UsageTotals
from rlmx.trace.events import (
    ChildEnd,
    ChildStart,
    Event,
    Exec,
    Final,
    LMCall,
    RunEnd,
    event_from_record,
    excerpt_text,
)


@dataclass
class Batch:
    """One `llm_query_batched` / `rlm_query_batched` request of a cell."""

    start: Event
    end: Event | None = None

    @property
    def method(self) -> str:
        return str(self.start.get("method", ""))

    @property
    def n(self) -> int:
        return int(self.start.get("n", 0))


@dataclass
class Cell:
    """A code cell the RLM ran, and everything it started: sub-calls, child RLMs, batches."""

    id: str
    exec: Exec | None = None  # None when the run stopped while the cell was running
    start: Event | None = None
    sub_calls: list[LMCall] = field(default_factory=list)
    children: list[RLMNode] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)  # fallbacks, child_end and the like

    @property
    def code(self) -> str:
        source = self.exec if self.exec is not None else self.start
        return excerpt_text(source.get("code")) if source is not None else ""

    @property
    def iteration(self) -> int | None:
        source = self.exec if self.exec is not None else self.start
        return source.iteration if source is not None else None


@dataclass
class Turn:
    iteration: int
    calls: list[LMCall] = field(default_factory=list)  # this RLM's own model calls in the turn
    cells: list[Cell] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)  # limit, final, error, compaction, ...


@dataclass
class RLMNode:
    """One RLM: the root (from `run_start`) or a child (from `child_start`)."""

    id: str
    depth: int
    start: Event
    end: Event | None = None  # run_end or child_end
    final: Final | None = None
    turns: list[Turn] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)  # records of this RLM outside any turn

    @property
    def question(self) -> str:
        return excerpt_text(self.start.get("question"))

    @property
    def model(self) -> str:
        return str(self.start.get("model", ""))

    @property
    def stopped_by(self) -> str | None:
        source = self.final or self.end
        return None if source is None else source.get("stopped_by")

    def walk(self) -> Iterator[RLMNode]:
        yield self
        for turn in self.turns:
            for cell in turn.cells:
                for child in cell.children:
                    yield from child.walk()

    def lm_calls(self) -> Iterator[LMCall]:
        """Every model call of this RLM's subtree: its turns, its cells' sub-calls, its children."""
        for turn in self.turns:
            yield from turn.calls
            for cell in turn.cells:
                yield from cell.sub_calls
                for child in cell.children:
                    yield from child.lm_calls()


@dataclass
class Trace:
    path: Path | None
    events: list[Event]
    root: RLMNode
    by_id: dict[str, Event]

    @property
    def run_start(self) -> Event:
        return self.root.start

    @property
    def run_end(self) -> Event | None:
        return self.root.end

    def nodes(self) -> Iterator[RLMNode]:
        return self.root.walk()

    def lm_calls(self) -> list[LMCall]:
        return [e for e in self.events if isinstance(e, LMCall)]

    def of_type(self, type_: str) -> list[Event]:
        return [e for e in self.events if e.type == type_]

    def usage(self) -> dict[str, Any]:
        """Usage recomputed from the lm_call records, shaped like `RunResult.usage` (without wall time)."""
        total = UsageTotals()
        by_model: dict[str, UsageTotals] = {}
        by_depth: dict[int, UsageTotals] = {}
        for call in self.lm_calls():
            if not call.counted:
                continue
            total.add(call.usage, call.cost_usd)
            by_model.setdefault(call.model, UsageTotals()).add(call.usage, call.cost_usd)
            by_depth.setdefault(call.depth, UsageTotals()).add(call.usage, call.cost_usd)
        out = total.to_dict()
        out["by_model"] = {name: totals.to_dict() for name, totals in by_model.items()}
        out["by_depth"] = {str(depth): totals.to_dict() for depth, totals in sorted(by_depth.items())}
        return out

    def summary(self) -> dict[str, Any]:
        end = self.run_end
        usage = self.usage()
        return {
            "question": self.root.question,
            "answer": None if end is None else excerpt_text(end.get("answer")) if end.get("answer") else None,
            "stopped_by": None if end is None else end.get("stopped_by"),
            "iterations": None if end is None else end.get("iterations"),
            "calls": usage["calls"],
            "input_tokens": usage["input_tokens"],
            "output_tokens": usage["output_tokens"],
            "cached_tokens": usage["cached_tokens"],
            "cost_usd": usage["cost_usd"],
            "elapsed_s": None if end is None else end.get("elapsed_s"),
            "finished": end is not None,
        }


def build(records: list[dict[str, Any]], path: Path | None = None) -> Trace:
    """The call tree of one run's records (in file order)."""
    events = [event_from_record(r) for r in records]
    by_id = {e.id: e for e in events}
    root = RLMNode(id=events[0].id, depth=0, start=events[0])
    nodes: dict[str, RLMNode] = {root.id: root}
    cells: dict[str, tuple[RLMNode, Cell]] = {}
    batches: dict[str, Batch] = {}
    for event in events[1:]:  # pass 1: the RLMs, the cells (exec ids) and the batches
        if isinstance(event, ChildStart):
            nodes[event.id] = RLMNode(id=event.id, depth=event.depth, start=event)
        elif event.type in ("exec", "exec_start"):
            exec_id = event.id if event.type == "exec" else str(event.get("exec_id"))
            owner = nodes.get(str(event.parent_id))
            if owner is not None:
                _, cell = cells.setdefault(exec_id, (owner, Cell(id=exec_id)))
                if isinstance(event, Exec):
                    cell.exec = event
                else:
                    cell.start = event
        elif event.type == "batch_start":
            batches[event.id] = Batch(start=event)
        elif event.type == "batch_end" and event.get("batch_id") in batches:
            batches[str(event.get("batch_id"))].end = event
    placed: set[str] = set()
    for exec_id, (owner, cell) in cells.items():
        if exec_id not in placed:
            placed.add(exec_id)
            turn_of(owner, cell.iteration or 0).cells.append(cell)
    for event in events[1:]:  # pass 2: hang every record where it belongs
        place(event, nodes, cells, batches)
    return Trace(path=path, events=events, root=root, by_id=by_id)


def place(
    event: Event,
    nodes: dict[str, RLMNode],
    cells: dict[str, tuple[RLMNode, Cell]],
    batches: dict[str, Batch],
) -> None:
    parent = str(event.parent_id)
    if event.type in ("exec", "exec_start", "batch_end"):
        return
    if isinstance(event, ChildStart):
        if parent in cells:
            cells[parent][1].children.append(nodes[event.id])
        return
    if event.type == "batch_start":
        if parent in cells:
            cells[parent][1].batches.append(batches[event.id])
        return
    if isinstance(event, RunEnd):
        if parent in nodes:
            nodes[parent].end = event
        return
    if isinstance(event, ChildEnd):
        if event.child_id in nodes:
            nodes[event.child_id].end = event
        if parent in cells:
            cells[parent][1].events.append(event)
        return
    if parent in cells:
        cell = cells[parent][1]
        if isinstance(event, LMCall):
            cell.sub_calls.append(event)
        else:
            cell.events.append(event)
        return
    node = nodes.get(parent)
    if node is None:
        return
    if isinstance(event, Final):
        node.final = event
    iteration = event.iteration
    if iteration is None:
        node.events.append(event)
    elif isinstance(event, LMCall):
        turn_of(node, iteration).calls.append(event)
    else:
        turn_of(node, iteration).events.append(event)


def turn_of(node: RLMNode, iteration: int) -> Turn:
    for turn in reversed(node.turns):
        if turn.iteration == iteration:
            return turn
    turn = Turn(iteration)
    node.turns.append(turn)
    node.turns.sort(key=lambda t: t.iteration)
    return turn
