"""Sampling for MCP servers that opted in (`"sampling": true`): a server's `sampling/createMessage`,
sent while one of its tools is being called, is answered by the calling run's sub-model through that
run's ledger -- counted, traced and bounded by its limits like an `llm_query` from the model's code."""

from __future__ import annotations

import asyncio
from typing import Any

from rlmx.engine.tools import CALLER


def sampler_here() -> Any:
    """A sampler for the tool call under way in this task (None outside one): an async function of the
    request's params, callable from any loop, that runs the model call on this run's loop."""
    caller = CALLER.get()
    if caller is None:
        return None
    state, depth, exec_id = caller
    loop = asyncio.get_running_loop()

    async def on_run_loop(params: Any) -> Any:
        import mcp_types as types

        from rlmx.errors import RLMError

        if state.limits.max_depth == 0:
            raise RLMError("sub-calls are disabled in this run (max_depth=0)")
        messages: list[dict[str, Any]] = []
        if getattr(params, "system_prompt", None):
            messages.append({"role": "system", "content": params.system_prompt})
        for message in params.messages:
            blocks = message.content if isinstance(message.content, list) else [message.content]
            texts = [getattr(b, "text", None) for b in blocks]
            if any(t is None for t in texts):
                raise RLMError("only text messages can be sampled (an image or audio block was sent)")
            messages.append({"role": message.role, "content": "\n".join(str(t) for t in texts)})
        lm = state.models.sub
        response = await state.call_model(
            lm, messages, depth=depth + 1, parent_id=exec_id, purpose="llm_query"
        )
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=response.text),
            model=lm.name,
            stop_reason="endTurn",
        )

    async def sample(params: Any) -> Any:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(on_run_loop(params), loop))

    return sample
