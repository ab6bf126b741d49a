"""A run's call tree as the flat list of display nodes the HTML report renders lazily.

Each display node is a small dict: `p` parent index (-1 at the top), `k` kind (rlm, turn, call, cell,
batch, sub, note), `l` label, `m` meta line, `c` USD of its whole subtree (None when unknown), `s` status
(ok, err, limit), `x` detail sections `[[title, text], ...]`, `ch` child indices, `d` depth, `e` trace id.
Timeline items are `[start_s, end_s, depth, kind, node]` with kind 0 = the RLM's own model call,
1 = a sub-call, 2 = a code cell.
"""

from __future__ import annotations

from typing import Any

from rlmx.outcomes import SUB_CALL_PURPOSES
from rlmx.trace import (
    Batch,
    Cell,
    ChildEnd,
    Error,
    Event,
    Fallback,
    Final,
    Limit,
    LMCall,
    LMRetry,
    OutputRejected,
    RLMNode,
    RunEnd,
    Trace,
    Turn,
)

LABEL_CHARS = 90
NOT_SHOWN = ("schema_version", "parent_id", "t")  # record fields a note's "record" section leaves out


IMAGES_LINE = "\n[images: "  # how a vision sub-call's trace text lists its images (rlmx.images.parts)


def one_line(text: str, limit: int = LABEL_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def money(value: float | None) -> str:
    if value is None:
        return "cost unknown"
    return f"${value:.4f}" if value >= 0.0001 or value == 0 else f"${value:.2e}"


def tokens_meta(call: LMCall) -> str:
    parts = [f"{call.input_tokens:,} in", f"{call.output_tokens:,} out"]
    if call.cached_tokens:
        parts.append(f"{call.cached_tokens:,} cached")
    if call.reasoning_tokens:
        parts.append(f"{call.reasoning_tokens:,} reasoning")
    parts.append(f"{call.duration_s:.2f}s")
    return " · ".join(parts)


class ReportBuilder:
    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.t0 = trace.run_start.t
        self.nodes: list[dict[str, Any]] = []
        self.timeline: list[list[Any]] = []

    # --- nodes --------------------------------------------------------------------------------------
    def add(self, parent: int, kind: str, label: str, **extra: Any) -> int:
        index = len(self.nodes)
        node: dict[str, Any] = {"p": parent, "k": kind, "l": label, "ch": [], "c": None, "s": "ok"}
        node.update({k: v for k, v in extra.items() if v not in (None, "", [])})
        self.nodes.append(node)
        if parent >= 0:
            self.nodes[parent]["ch"].append(index)
        return index

    def span(self, event: Event, duration: float, kind: int, node: int) -> None:
        end = event.t - self.t0
        self.timeline.append([round(max(0.0, end - duration), 4), round(end, 4), event.depth, kind, node])

    def build(self) -> dict[str, Any]:
        self.rlm(self.trace.root, -1)
        return {"summary": self.summary(), "nodes": self.nodes, "timeline": self.timeline}

    def rlm(self, node: RLMNode, parent: int) -> float | None:
        end = node.final or node.end
        stopped = None if end is None else end.stopped_by
        label = "Root RLM" if node.depth == 0 else f"Child RLM: {one_line(node.question)}"
        details = [["question", node.question]]
        answer = None if end is None else end.answer_text
        if answer is not None:
            details.append(["answer", answer])
        if end is not None and end.error:
            details.append(["error", end.error])
        meta = f"{node.model} · {len(node.turns)} turn(s) · " + (
            f"stopped by {stopped}" if stopped else "did not finish"
        )
        index = self.add(
            parent,
            "rlm",
            label,
            m=meta,
            x=details,
            d=node.depth,
            e=node.id,
            s="ok" if stopped == "final" else "err" if stopped in (None, "error") else "limit",
        )
        costs = [self.turn(turn, index, node.depth) for turn in node.turns]
        costs += [self.note(event, index) for event in node.events]
        return self.set_cost(index, costs)

    def turn(self, turn: Turn, parent: int, depth: int) -> float | None:
        tokens_in = sum(c.input_tokens for c in turn.calls)
        tokens_out = sum(c.output_tokens for c in turn.calls)
        meta = f"{len(turn.cells)} code cell(s) · {tokens_in:,} in / {tokens_out:,} out tokens"
        index = self.add(parent, "turn", f"Turn {turn.iteration}", m=meta, d=depth)
        items: list[tuple[float, Any]] = [(c.t - c.duration_s, c) for c in turn.calls]
        items += [
            (cell.start.t if cell.start else (cell.exec.t if cell.exec else 0.0), cell) for cell in turn.cells
        ]
        items += [(e.t, e) for e in turn.events]
        costs = []
        for _, item in sorted(items, key=lambda pair: pair[0]):
            if isinstance(item, LMCall):
                costs.append(self.call(item, index))
            elif isinstance(item, Cell):
                costs.append(self.cell(item, index, depth))
            else:
                costs.append(self.note(item, index))
        status = "err" if any(self.nodes[i]["s"] == "err" for i in self.nodes[index]["ch"]) else "ok"
        self.nodes[index]["s"] = status
        return self.set_cost(index, costs)

    def call(self, call: LMCall, parent: int) -> float | None:
        sub = call.purpose in SUB_CALL_PURPOSES
        messages = call.message_texts
        details = [[f"message ({role})", text] for role, text in messages]
        details.append(["reply", call.reply_text] if call.reply is not None else ["error", call.error or ""])
        if sub:
            prompt = messages[-1][1] if messages else ""
            prompt, _, shown = prompt.partition(IMAGES_LINE)  # a vision call: its images' names and sizes
            images = shown.removesuffix("]").split("; ") if shown else []
            if images:
                details.insert(len(details) - 1, ["images", "\n".join(images)])
            seen = f" [{len(images)} image{'s' if len(images) != 1 else ''}]" if images else ""
            label = f"{call.purpose}{seen}: {one_line(prompt, 70)}"
        else:
            label = f"model call ({call.purpose}) → {one_line(call.reply_text, 60)}"
        index = self.add(
            parent,
            "sub" if sub else "call",
            label,
            m=f"{call.model} · {tokens_meta(call)}",
            x=details,
            d=call.depth,
            e=call.id,
            s="err" if call.error else "ok",
            c=call.cost_usd if call.counted else 0.0,  # a cache hit costs nothing
        )
        self.span(call, call.duration_s, 1 if sub else 0, index)
        return call.cost_usd if call.counted else 0.0

    def cell(self, cell: Cell, parent: int, depth: int) -> float | None:
        code = cell.code
        first = next((line for line in code.splitlines() if line.strip()), "")
        details = [["code", code]]
        status = "ok"
        if cell.exec is not None:
            details.append(["output", cell.exec.output_text or "(no output)"])
            if cell.exec.error:
                details.append(["error", cell.exec.error])
                status = "err"
            meta = f"{cell.exec.duration_s:.2f}s"
        else:
            meta = "did not finish"
            status = "err"
        counts = [f"{len(cell.sub_calls)} sub-call(s)"] if cell.sub_calls else []
        counts += [f"{len(cell.children)} child RLM(s)"] if cell.children else []
        index = self.add(
            parent,
            "cell",
            f"code: {one_line(first, 70)}",
            m=" · ".join([meta, *counts]),
            x=details,
            d=depth,
            e=cell.id,
            s=status,
        )
        if cell.exec is not None:
            self.span(cell.exec, cell.exec.duration_s, 2, index)
        return self.set_cost(index, self.cell_items(cell, index))

    def cell_items(self, cell: Cell, index: int) -> list[float | None]:
        in_batch: dict[str, list[Any]] = {b.start.id: [] for b in cell.batches}
        items: list[tuple[float, Any]] = [(b.start.t, b) for b in cell.batches]
        for call in cell.sub_calls:
            if call.batch_id in in_batch:
                in_batch[str(call.batch_id)].append(call)
            else:
                items.append((call.t - call.duration_s, call))
        for child in cell.children:
            if child.batch_id is not None and child.batch_id in in_batch:
                in_batch[child.batch_id].append(child)
            else:
                items.append((child.start.t, child))
        items += [(e.t, e) for e in cell.events if not isinstance(e, ChildEnd)]  # shown by the child
        costs = []
        for _, item in sorted(items, key=lambda pair: pair[0]):
            if isinstance(item, Batch):
                costs.append(self.batch(item, in_batch[item.start.id], index))
            else:
                costs.append(self.item(item, index))
        return costs

    def item(self, item: Any, parent: int) -> float | None:
        if isinstance(item, LMCall):
            return self.call(item, parent)
        if isinstance(item, RLMNode):
            return self.rlm(item, parent)
        return self.note(item, parent)

    def batch(self, batch: Batch, members: list[Any], parent: int) -> float | None:
        errors = None if batch.end is None else batch.end.errors
        meta = f"{batch.n} prompt(s)" + (f" · {errors} error(s)" if errors else "")
        index = self.add(
            parent,
            "batch",
            f"{batch.method} × {batch.n}",
            m=meta,
            d=batch.start.depth,
            e=batch.start.id,
            s="err" if errors else "ok",
        )
        return self.set_cost(index, [self.item(m, index) for m in members])

    def note(self, event: Event, parent: int) -> float | None:
        text = note_text(event)
        status = (
            "err"
            if isinstance(event, (Error, OutputRejected))
            else "limit"
            if isinstance(event, Limit)
            else "ok"
        )
        extra = {k: v for k, v in event.to_record().items() if k not in NOT_SHOWN}
        self.add(
            parent,
            "note",
            f"{event.type}: {one_line(text, 80)}",
            x=[[event.type, text], ["record", str(extra)]],
            d=event.depth,
            e=event.id,
            s=status,
        )
        return 0.0

    def set_cost(self, index: int, costs: list[float | None]) -> float | None:
        total = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
        self.nodes[index]["c"] = total
        return total

    # --- the summary --------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        summary = self.trace.summary()
        start = self.trace.run_start
        summary["model"] = start.model
        summary["sub_model"] = start.sub_model
        summary["run_id"] = start.run_id
        summary["limits"] = start.limits or {}
        summary["warnings"] = start.warnings or []
        summary["depth_max"] = max((e.depth for e in self.trace.events), default=0)
        summary["events"] = len(self.trace.events)
        summary["duration_s"] = round(max((e.t for e in self.trace.events), default=self.t0) - self.t0, 3)
        return summary


def note_text(event: Event) -> str:
    """What a note says: why a limit or a fallback happened, an error, a rejected answer's problems, an
    RLM's answer (or how it stopped)."""
    if isinstance(event, (Limit, Fallback)):
        return event.reason
    if isinstance(event, Error):
        return event.message
    if isinstance(event, OutputRejected):
        return str(event.errors) if event.errors else ""
    if isinstance(event, LMRetry):
        return event.error
    if isinstance(event, (Final, ChildEnd, RunEnd)):
        return event.answer_text or event.stopped_by
    return ""


def report_data(trace: Trace) -> dict[str, Any]:
    return ReportBuilder(trace).build()
