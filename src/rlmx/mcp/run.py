"""The MCP servers of one run or session: started before the run's first model call, their tools added
to the run's `RunTools`, stopped when the run (or the session) ends. See docs/mcp-servers.md."""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlmx.tools import RunTools, ToolSet

log = logging.getLogger("rlmx.mcp")


@dataclass
class McpRun:
    hub: Any
    tools: ToolSet = field(default_factory=ToolSet)
    prompt: str = ""
    warnings: list[str] = field(default_factory=list)

    def run_tools(self, base: RunTools) -> RunTools:
        """`base` with the MCP functions in every REPL of the run (root and children)."""
        if not self.tools:
            return base
        return dataclasses.replace(base, mcp=self.tools, mcp_prompt=self.prompt)

    async def aclose(self) -> None:
        await self.hub.aclose()


async def open_mcp(sources: Any, base: RunTools, say: Callable[[str], None] | None = None) -> McpRun:
    """Start the servers `sources` configure (a path, a dict, a list of them); every one that does not
    start is one warning line, and the run goes on without it."""
    from rlmx.mcp.config import load_servers, require_sdk

    require_sdk()
    from rlmx.mcp.client import McpHub
    from rlmx.mcp.tools import build_toolset

    warnings: list[str] = []
    starting = True

    def note(line: str) -> None:
        """At start: a warning of the run's `run_start` record (which every front end shows); later (a
        server asking for sampling mid-run): a logged warning."""
        if say is not None:
            say(line)
        elif starting:
            warnings.append(line)
            log.info("%s", line)
        else:
            log.warning("%s", line)

    servers = await asyncio.to_thread(load_servers, sources)
    hub = McpHub(servers, say=note)
    try:
        for line in await asyncio.to_thread(hub.start):
            note(line)
        taken = set(base.root.tools) | set(base.sub.tools)
        tools, prompt = build_toolset(hub, taken, note)
    except BaseException:
        await hub.aclose()
        raise
    starting = False
    return McpRun(hub, tools, prompt, warnings)


_pool_lock = threading.Lock()
_POOLS: list[McpRun] = []  # this process's batch servers (pooled_mcp), for close_pools


def close_pools() -> None:
    """Stop every batch's servers in this process (a Ray worker starting another batch's items)."""
    with _pool_lock:
        pools, _POOLS[:] = list(_POOLS), []
    for pool in pools:
        pool.hub.close()


async def pooled_mcp(owner: Any, sources: Any, base: RunTools) -> McpRun:
    """`owner`'s (an RLM's) servers, shared by the runs of a batch in this process: started by the
    first, closed by `owner.aclose()` (or when the process exits)."""

    def get() -> McpRun:
        with _pool_lock:
            pool = getattr(owner, "_mcp_pool", None)
            if pool is None:
                pool = asyncio.run(open_mcp(sources, base))
                owner._mcp_pool = pool
                _POOLS.append(pool)
                atexit.register(pool.hub.close)  # a Ray worker's servers: stopped when it exits
            return pool

    return await asyncio.to_thread(get)
