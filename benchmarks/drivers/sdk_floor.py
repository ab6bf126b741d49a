"""Driver: the SDK floor -- `n` requests sent by a bare `openai.AsyncOpenAI` client at `concurrency`
in flight, no harness. Same SDK with the same HTTP client settings as rlmx's (`http_client(url)`), same
server, same prompts as the harness's fan-out.

With `"schedule": [1, 1, 1, 105, 1]` it replays a run's shape instead: the groups in sequence, each
group's requests at `concurrency` in flight, from a cold client (no warm-up), as a run starts; the time
is from the first request to the last reply.

Prints `RESULT {json}` with the wall time of the `n` requests (one warm-up request first, not timed).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import openai


async def send(url: str, groups: list[int], concurrency: int, *, warm_up: bool) -> float:
    """Seconds from the first request of `groups` (in sequence, each at `concurrency` in flight) to the
    last reply; with `warm_up`, one request first that is not timed."""
    from rlmx.lm.openai_compat import http_client

    client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0, http_client=http_client(url))
    semaphore = asyncio.Semaphore(concurrency)

    async def one(prompt: str) -> None:
        async with semaphore:
            await client.chat.completions.create(
                model="scripted", messages=[{"role": "user", "content": prompt}]
            )

    if warm_up:
        await one("warm-up")
    started = time.perf_counter()
    for g, size in enumerate(groups):
        await asyncio.gather(*(one(f"group {g} item {i}") for i in range(size)))
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    if "schedule" in spec:
        seconds = asyncio.run(send(spec["url"], spec["schedule"], spec["concurrency"], warm_up=False))
    else:
        seconds = asyncio.run(send(spec["url"], [spec["n"]], spec["concurrency"], warm_up=True))
    print("RESULT " + json.dumps({"call_s": seconds}), flush=True)
