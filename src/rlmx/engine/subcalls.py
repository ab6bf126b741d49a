"""What a node's REPL asks of the host: sub-model calls, child RLMs and batches of either."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from rlmx.context.metadata import describe
from rlmx.context.payload import ContextPayload
from rlmx.engine.result import NodeResult
from rlmx.engine.tools import ToolRunner
from rlmx.errors import RLMError
from rlmx.images.parts import message_image_tokens, prepare
from rlmx.lm.base import BaseLM, Message, estimate_tokens
from rlmx.outcomes import Purpose
from rlmx.pricing import catalog_sees_images
from rlmx.trace.events import BatchEnd, BatchStart, Fallback, ModelSubstituted

if TYPE_CHECKING:
    from rlmx.engine.run_state import RunState

DEFAULT_BATCH_WIDTH = 128  # calls of a batch under way at once when the model does not say its concurrency

# starts a child RLM one level down and waits for it: (question, payload, meta, parent_id, batch_id, model)
Spawn = Callable[
    ["str | None", ContextPayload, str, str, "str | None", "BaseLM | None"], Awaitable[NodeResult]
]


class SubCalls:
    """Answers one RLM's `llm_query*` / `rlm_query*` requests. Every model call goes through the run's
    ledger (`RunState.call_model`); a child RLM is started with `spawn` and bounded by `children`."""

    def __init__(
        self,
        state: RunState,
        *,
        depth: int,
        sub_lm: BaseLM,
        payload: ContextPayload,
        meta: str,
        spawn: Spawn,
        children: asyncio.Semaphore,
    ) -> None:
        self.state = state
        self.depth = depth  # of the RLM whose REPL asks; its sub-calls are at depth + 1
        self.sub_lm = sub_lm
        self.payload = payload  # what a child gets when it is given no context of its own
        self.meta = meta
        self.spawn = spawn
        self.children = children
        self.tools = ToolRunner(state, state.tools, depth)
        self.notes: dict[str, list[str]] = {}  # a cell's (by exec id) notes for its output, in order
        if payload.kind == "files":
            state.image_files.update(image_files(payload))

    async def handle(self, method: str, params: dict[str, Any], exec_id: str) -> Any:
        """One request of the REPL; its result goes to the model's code as it is. What the code should
        also be told (a model it named that this run does not have) is kept for the cell's output:
        `take_notes`."""
        if method == "tool":  # one of the user's tools: not a model call, allowed at any max_depth
            return await self.tools.call(params, exec_id)
        if self.state.limits.max_depth == 0:
            raise RLMError(f"{method} is disabled in this run (max_depth=0): no sub-calls are allowed")
        lm = self.model_for(params.get("model"), exec_id)
        return await self._answer(method, params, exec_id, lm)

    def take_notes(self, exec_id: str) -> list[str]:
        """The notes for the cell `exec_id`'s output, in order, and forget them."""
        return self.notes.pop(exec_id, [])

    async def _answer(self, method: str, params: dict[str, Any], exec_id: str, lm: BaseLM | None) -> Any:
        images, detail = params.get("images"), params.get("detail")
        if method == "llm_query":
            return await self.sub_call(
                as_prompt(params.get("prompt")), lm, exec_id, images=images, detail=detail
            )
        if method == "llm_query_batched":
            prompts_ = as_prompts(params.get("prompts"))
            if images is not None and (not isinstance(images, list) or len(images) != len(prompts_)):
                raise RLMError("llm_query_batched: images must be a list of image lists, one per prompt")
            per_prompt = images if images is not None else [None] * len(prompts_)
            return await self.batch(
                method,
                exec_id,
                [
                    partial(self.sub_call, p, lm, exec_id, images=i, detail=detail)
                    for p, i in zip(prompts_, per_prompt, strict=True)
                ],
                width=self.batch_width(lm),
            )
        if method == "rlm_query":
            try:
                return await self.rlm(as_prompt(params.get("prompt")), params.get("context"), exec_id, lm=lm)
            except ChildFailed as exc:  # a child's own failure is an answer the model can read
                return item_error(exc)
        if method == "rlm_query_batched":
            prompts_ = as_prompts(params.get("prompts"))
            contexts = params.get("contexts") or [None] * len(prompts_)
            if not isinstance(contexts, list) or len(contexts) != len(prompts_):
                raise RLMError("rlm_query_batched: contexts must be a list as long as prompts")
            return await self.batch(
                method,
                exec_id,
                [partial(self.rlm, p, c, exec_id, lm=lm) for p, c in zip(prompts_, contexts, strict=True)],
                width=self.batch_width(None),
            )
        raise RLMError(f"unknown REPL request {method!r}")

    def model_for(self, name: Any, exec_id: str) -> BaseLM | None:
        """The run's model called `name` (None: the default). A name this run does not have is served
        by the sub-model, said in the trace and in the cell's output (a note)."""
        if not name:
            return None
        found = self.state.models.find(str(name))
        if found is not None:
            return found
        used = self.sub_lm.name
        self.state.emitter.emit(
            ModelSubstituted(parent_id=exec_id, depth=self.depth, requested=str(name), used=used)
        )
        self.notes.setdefault(exec_id, []).append(
            f"model {str(name)!r} is not in this run; {used} answered instead"
        )
        return None

    def batch_width(self, lm: BaseLM | None) -> int:
        """How many calls of a batch are under way at once: twice the model's own concurrency, so a
        call waiting out a retry does not idle a slot, and never all of a 1,000-item batch at once."""
        concurrency = (lm or self.sub_lm).concurrency
        return 2 * concurrency if concurrency is not None and concurrency > 0 else DEFAULT_BATCH_WIDTH

    async def batch(
        self, method: str, exec_id: str, calls: list[Callable[..., Awaitable[str]]], *, width: int
    ) -> list[str]:
        """One batched request: its calls run concurrently between `batch_start` and `batch_end` records,
        and each of their records carries `batch_id` (for progress counters and the viewer)."""
        depth = self.depth
        start = BatchStart(parent_id=exec_id, depth=depth, method=method, n=len(calls))
        batch_id = self.state.emitter.emit(start).id
        errors = 0

        async def item(call: Callable[..., Awaitable[str]]) -> str:
            nonlocal errors
            try:
                return await call(batch_id=batch_id)
            except RLMError as exc:  # one item's failure: counted, and the others are kept
                errors += 1
                return item_error(exc)

        results = await run_bounded([partial(item, call) for call in calls], width)
        end = BatchEnd(
            parent_id=exec_id, depth=depth, batch_id=batch_id, method=method, n=len(calls), errors=errors
        )
        self.state.emitter.emit(end)
        return results

    async def sub_call(
        self,
        prompt: str,
        lm: BaseLM | None,
        parent_id: str,
        *,
        purpose: Purpose = "llm_query",
        batch_id: str | None = None,
        images: Any = None,
        detail: Any = None,
    ) -> str:
        """One plain sub-call (`lm` None: the sub-model), with `images` when the cell gave some (see
        rlmx.images.parts); a refusal or failure raises (an `RLMError`)."""
        lm = lm or self.sub_lm
        content: Any = prompt
        log: list[Message] | None = None
        if images is not None:
            catalog = catalog_sees_images(lm.name)
            content, shown = prepare(lm, prompt, images, detail, self.state.image_files, catalog=catalog)
            log = [{"role": "user", "content": shown}]
        messages: list[Message] = [{"role": "user", "content": content}]
        context_window = self.state.models.window(lm)
        tokens = estimate_tokens(prompt) + message_image_tokens(messages, lm.name, lm)
        if tokens > context_window:
            raise RLMError(
                f"prompt of about {tokens:,} tokens exceeds the window of {lm.name} "
                f"(about {context_window:,} tokens); split it into smaller chunks"
            )
        response = await self.state.call_model(
            lm,
            messages,
            depth=self.depth + 1,
            parent_id=parent_id,
            purpose=purpose,
            batch_id=batch_id,
            log_messages=log,
        )
        return response.text

    async def rlm(
        self,
        prompt: str,
        context: Any,
        parent_id: str,
        *,
        lm: BaseLM | None = None,
        batch_id: str | None = None,
    ) -> str:
        """A child RLM's answer (or, at the depth limit, a plain call's); a child that ends without an
        answer raises `ChildFailed`."""
        max_depth = self.state.limits.max_depth
        if self.depth + 1 >= max_depth:
            reason = f"rlm_query at depth {self.depth} with max_depth={max_depth} runs as a plain llm_query"
            self.state.emitter.emit(Fallback(parent_id=parent_id, depth=self.depth, reason=reason))
            if context is not None:
                prompt = f"{prompt}\n\nContext:\n{context if isinstance(context, str) else json.dumps(context, default=str)}"
            return await self.sub_call(prompt, lm, parent_id, purpose="fallback", batch_id=batch_id)
        if context is None and self.state.profile.dialect.child_context_is_prompt:
            context = prompt
        if context is None:  # the parent's own payload: its REPL inherits the zygote's copy
            payload, meta = self.payload, self.meta
        else:
            payload, meta = ContextPayload.of(context), describe(context)
        async with self.children:
            result = await self.spawn(prompt, payload, meta, parent_id, batch_id, lm)
        if not result.answer.given:
            message = f"the child run ended by {result.stopped_by}: {result.error or 'no answer'}"
            if self.state.profile.dialect.child_failure_returned:  # as the official runtime returns it
                return f"Error: {message}"
            raise ChildFailed(message)
        return result.answer.text()


class ChildFailed(RLMError):
    """A child RLM ended without an answer (its stop reason and error in the message)."""


def item_error(exc: RLMError) -> str:
    """What the model's code gets for a failed item of a batch (or a failed child): a string naming
    the failure, so one item never loses the others."""
    return f"[{'rlm_query' if isinstance(exc, ChildFailed) else 'llm_query'} error] {exc}"


async def run_bounded(calls: list[Callable[[], Awaitable[str]]], width: int) -> list[str]:
    """Every call's result, in order, with at most `width` under way at once (`width` workers take
    the next call as they finish one). The workers start one per turn of the event loop, so the first
    requests are on the wire while later ones are still being prepared: started all at once, 1,000
    calls took ~100 ms of preparation before the first request left. If one call raises, the others
    are cancelled and the error propagates."""
    results: list[str] = [""] * len(calls)
    pending = iter(enumerate(calls))

    async def worker() -> None:
        for index, call in pending:
            results[index] = await call()

    workers: list[asyncio.Task[None]] = []
    try:
        for _ in range(min(width, len(calls))):
            workers.append(asyncio.ensure_future(worker()))
            await asyncio.sleep(0)
        await asyncio.gather(*workers)
    finally:
        for task in workers:
            task.cancel()
    return results


def image_files(payload: ContextPayload) -> dict[str, str]:
    """The image files of a context of files: document name and absolute path -> path to read."""
    from rlmx.context.sources import Manifest

    manifest = Manifest.from_json(json.loads(payload.data()))
    files: dict[str, str] = {}
    for entry in manifest.files:
        if entry.fmt == "image":
            files[entry.name] = files[os.path.abspath(entry.path)] = entry.path
    return files


def as_prompt(value: Any) -> str:
    if not isinstance(value, str):
        raise RLMError("a prompt must be a string")
    return value


def as_prompts(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise RLMError("prompts must be a list of strings")
    return value


MAX_NOTES = 20  # a cell's notes shown; the host adds them, so the worker's output cap does not bound them


def with_notes(output: str, notes: list[str]) -> str:
    """A cell's output with the host's notes after it, one `[rlmx] <note>` line each."""
    if not notes:
        return output
    lines = ["[rlmx] " + " ".join(note.splitlines()) for note in notes[:MAX_NOTES]]
    if len(notes) > MAX_NOTES:
        lines.append(f"[rlmx] ... and {len(notes) - MAX_NOTES} more notes")
    gap = "\n" if output and not output.endswith("\n") else ""
    return output + gap + "\n".join(lines) + "\n"
