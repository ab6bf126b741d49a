"""The call tree of one run: RLMs, their turns, the code cells of a turn and what each cell started."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rlmx.errors import ConfigError
from rlmx.outcomes import StopReason
from rlmx.trace.events import (
    BatchEnd,
    BatchStart,
    ChildEnd,
    ChildStart,
    Compaction,
    Error,
    Event,
    Exec,
    ExecStart,
    Final,
    Limit,
    LMCall,
    OutputRejected,
    RunEnd,
    RunStart,
    from_record,
    usage_of,
)

E = TypeVar("E", bound=Event)
# The records an RLM writes about one of its own turns (they carry its `iteration`); exec_start and exec
# carry it too, but they make the turn's cells.
TURN_EVENTS = (LMCall, Compaction, Limit, OutputRejected, Error, Final)


def as_events(items: Iterable[Event | dict[str, Any]]) -> list[Event]:
    """Events as they are; raw JSON records (from `read_records`) read into their classes."""
    return [item if isinstance(item, Event) else from_record(item) for item in items]


@dataclass
class Batch:
    """One `llm_query_batched` / `rlm_query_batched` request of a cell."""

    start: BatchStart
    end: BatchEnd | None = None

    @property
    def method(self) -> str:
        return self.start.method

    @property
    def n(self) -> int:
        return self.start.n


@dataclass
class Cell:
    """A code cell the RLM ran, and everything it started: sub-calls, child RLMs, batches."""

    id: str
    exec: Exec | None = None  # None when the run stopped while the cell was running
    start: ExecStart | None = None
    sub_calls: list[LMCall] = field(default_factory=list)
    children: list[RLMNode] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)  # fallbacks, child_end and the like

    @property
    def code(self) -> str:
        """The code's text (from `exec`, or from `exec_start` when the cell never finished)."""
        source = self.exec if self.exec is not None else self.start
        return source.code_text if source is not None else ""

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
    start: RunStart | ChildStart
    end: RunEnd | ChildEnd | None = None
    final: Final | None = None
    turns: list[Turn] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)  # records of this RLM outside any turn

    @property
    def question(self) -> str:
        return self.start.question_text

    @property
    def model(self) -> str:
        return self.start.model

    @property
    def batch_id(self) -> str | None:
        """The batch that started this child RLM (None for the root and for a lone `rlm_query`)."""
        return self.start.batch_id if isinstance(self.start, ChildStart) else None

    @property
    def stopped_by(self) -> StopReason | None:
        source = self.final or self.end
        return None if source is None else source.stopped_by

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
    def run_start(self) -> RunStart:
        start = self.root.start
        if not isinstance(start, RunStart):  # `build` makes the root from a run_start, always
            raise TypeError(f"the root of a trace starts with a run_start, not {start.type}")
        return start

    @property
    def run_end(self) -> RunEnd | None:
        end = self.root.end
        return end if isinstance(end, RunEnd) else None

    def nodes(self) -> Iterator[RLMNode]:
        return self.root.walk()

    def lm_calls(self) -> list[LMCall]:
        return self.of_type(LMCall)

    def of_type(self, cls: type[E]) -> list[E]:
        """Every event of the run that is a `cls` (e.g. `trace.of_type(Exec)`)."""
        return [e for e in self.events if isinstance(e, cls)]

    def usage(self) -> dict[str, Any]:
        """Usage recomputed from the lm_call records, shaped like `RunResult.usage` (without wall time)."""
        return usage_of(self.events)

    def summary(self) -> dict[str, Any]:
        end = self.run_end
        usage = self.usage()
        return {
            "question": self.root.question,
            "answer": None if end is None else end.answer_text,
            "stopped_by": None if end is None else end.stopped_by,
            "iterations": None if end is None else end.iterations,
            "calls": usage["calls"],
            "input_tokens": usage["input_tokens"],
            "output_tokens": usage["output_tokens"],
            "cached_tokens": usage["cached_tokens"],
            "cost_usd": usage["cost_usd"],
            "elapsed_s": None if end is None else end.elapsed_s,
            "finished": end is not None,
        }


def build(items: Iterable[Event | dict[str, Any]], path: Path | None = None) -> Trace:
    """The call tree of one run: its events (or raw records) in file order, the run_start first."""
    events = as_events(items)
    start = events[0] if events else None
    if not isinstance(start, RunStart):
        raise ConfigError(f"{path or 'trace'}: a run begins with a run_start record")
    by_id = {e.id: e for e in events}
    root = RLMNode(id=start.id, depth=0, start=start)
    nodes: dict[str, RLMNode] = {root.id: root}
    cells: dict[str, tuple[RLMNode, Cell]] = {}
    batches: dict[str, Batch] = {}
    for event in events[1:]:  # pass 1: the RLMs, the cells (exec ids) and the batches
        if isinstance(event, ChildStart):
            nodes[event.id] = RLMNode(id=event.id, depth=event.depth, start=event)
        elif isinstance(event, (Exec, ExecStart)):
            exec_id = event.id if isinstance(event, Exec) else event.exec_id
            owner = nodes.get(str(event.parent_id))
            if owner is not None:
                _, cell = cells.setdefault(exec_id, (owner, Cell(id=exec_id)))
                if isinstance(event, Exec):
                    cell.exec = event
                else:
                    cell.start = event
        elif isinstance(event, BatchStart):
            batches[event.id] = Batch(start=event)
        elif isinstance(event, BatchEnd) and event.batch_id in batches:
            batches[event.batch_id].end = event
    for owner, cell in cells.values():
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
    if isinstance(event, (Exec, ExecStart, BatchEnd)):  # placed in pass 1
        return
    if isinstance(event, ChildStart):
        if parent in cells:
            cells[parent][1].children.append(nodes[event.id])
        return
    if isinstance(event, BatchStart):
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
    iteration = event.iteration if isinstance(event, TURN_EVENTS) else None
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
