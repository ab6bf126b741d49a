"""Condensing a node's older turns: one model call folds them into a running summary (a failed or
refused call only skips the summary), then a `Compaction` record."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlmx.engine.profiles import compaction_request
from rlmx.errors import BudgetExhausted, ModelError
from rlmx.trace.events import Compaction, Error

if TYPE_CHECKING:
    from rlmx.engine.node import Node


async def compact(node: Node) -> None:
    old = node.history.turns_to_condense()
    digest = "\n\n".join(f"[{m['role']}]\n{str(m['content'])[:4000]}" for m in old)
    ask = compaction_request(node.question, node.history.summary, digest)
    summary: str | None = None
    try:
        summary = (
            await node.tree.call_model(
                node.lm,
                ask,
                depth=node.depth,
                parent_id=node.id,
                purpose="compaction",
                iteration=node.iteration,
            )
        ).text
    except (BudgetExhausted, ModelError) as exc:
        node.emit(Error(**node.here(), message=f"compaction summary skipped: {exc}", recoverable=True))
    node.history.compact(summary)
    node.emit(
        Compaction(
            **node.here(),
            iteration=node.iteration,
            condensed_upto=node.history.compacted_upto,
            view_tokens=node.history.view_tokens(),
        )
    )
