"""Condensing an RLM's older turns: one model call folds them into a running summary (a failed or
refused call only skips the summary), then a `Compaction` record. Under a dialect whose summary replaces
the turns (the strict official one) the model summarises its whole history instead, and what it is sent
afterwards is the head, its summary and a note (`summarise_all`)."""

from __future__ import annotations

from rlmx.engine.history import History
from rlmx.engine.profiles import compaction_request
from rlmx.engine.run_state import RunState
from rlmx.errors import BudgetExhausted, ModelError
from rlmx.lm.base import LM
from rlmx.prompts import fill, load
from rlmx.trace.events import Compaction, Error


async def compact(
    state: RunState, history: History, *, lm: LM, question: str, node_id: str, depth: int, iteration: int
) -> None:
    """Condense the older turns of `history`, the history of the RLM `node_id` at `depth` asked
    `question`, with a call to its model `lm` at turn `iteration`."""
    if state.profile.dialect.summary_replaces_turns:
        await summarise_all(state, history, lm=lm, node_id=node_id, depth=depth, iteration=iteration)
        return
    old = history.turns_to_condense()
    digest = "\n\n".join(f"[{m['role']}]\n{str(m['content'])[:4000]}" for m in old)
    ask = compaction_request(question, history.summary, digest)
    summary: str | None = None
    try:
        summary = (
            await state.call_model(
                lm, ask, depth=depth, parent_id=node_id, purpose="compaction", iteration=iteration
            )
        ).text
    except (BudgetExhausted, ModelError) as exc:
        state.emitter.emit(
            Error(
                parent_id=node_id, depth=depth, message=f"compaction summary skipped: {exc}", recoverable=True
            )
        )
    history.compact(summary)
    compacted(state, history, node_id=node_id, depth=depth, iteration=iteration)


async def summarise_all(
    state: RunState, history: History, *, lm: LM, node_id: str, depth: int, iteration: int
) -> None:
    """The official runtime's compaction: the history as sent, plus a request for a summary; from then
    on the model is sent the head, its summary (an assistant message) and a note to continue from it."""
    request, note = load("compaction_official.md").split("\n---\n", 1)
    ask = [*history.for_model(), {"role": "user", "content": request.strip()}]
    try:
        reply = await state.call_model(
            lm, ask, depth=depth, parent_id=node_id, purpose="compaction", iteration=iteration
        )
    except (BudgetExhausted, ModelError) as exc:
        state.emitter.emit(
            Error(parent_id=node_id, depth=depth, message=f"compaction skipped: {exc}", recoverable=True)
        )
        return
    history.replace_with_summary(reply.text, fill(note.strip(), count=history.compactions + 1))
    compacted(state, history, node_id=node_id, depth=depth, iteration=iteration)


def compacted(state: RunState, history: History, *, node_id: str, depth: int, iteration: int) -> None:
    """The `compaction` record of a history just compacted."""
    state.emitter.emit(
        Compaction(
            parent_id=node_id,
            depth=depth,
            iteration=iteration,
            condensed_upto=history.compacted_upto,
            view_tokens=history.view_tokens(),
        )
    )
