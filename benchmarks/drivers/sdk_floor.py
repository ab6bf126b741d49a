"""Driver: the SDK floor -- `n` requests sent by a bare `openai.AsyncOpenAI` client at `concurrency`
in flight, no harness. Same SDK, same server, same prompts as the harness's fan-out.

Prints `RESULT {json}` with the wall time of the `n` requests (one warm-up request first).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import openai


async def fan_out(url: str, n: int, concurrency: int) -> float:
    client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
    semaphore = asyncio.Semaphore(concurrency)

    async def one(prompt: str) -> str:
        async with semaphore:
            reply = await client.chat.completions.create(
                model="scripted", messages=[{"role": "user", "content": prompt}]
            )
            return reply.choices[0].message.content or ""

    await one("warm-up")
    started = time.perf_counter()
    await asyncio.gather(*(one(f"item {i}") for i in range(n)))
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    seconds = asyncio.run(fan_out(spec["url"], spec["n"], spec["concurrency"]))
    print("RESULT " + json.dumps({"call_s": seconds}), flush=True)
