"""The default executor of an event loop rlmx owns (`RLM.run()`, a sync `Session`, a batch's loop)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor


class UnwaitedExecutor(ThreadPoolExecutor):
    """Shutting it down never waits for its threads: `asyncio.run` would otherwise wait, at its end, for
    a thread stuck in a call the run abandoned at its deadline (a DNS lookup, an in-process model)."""

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=True)
