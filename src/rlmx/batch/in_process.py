"""The local executor: the batch's items as asyncio tasks in this process, `concurrency` at a time,
sharing one fleet (ledger and rate limiters) and the RLMs (model connections) of equal settings."""

from __future__ import annotations

import asyncio
from typing import Any

from rlmx.batch.client import InProcessFleetClient
from rlmx.batch.executor import Finished, Plan
from rlmx.batch.fleet import Fleet
from rlmx.batch.item_run import host_name
from rlmx.batch.items import BatchItem
from rlmx.engine.threads import UnwaitedExecutor


class InProcessExecutor:
    name = "local"

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self.tasks: dict[asyncio.Task[dict[str, Any]], tuple[BatchItem, int]] = {}
        self.runner: Any = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """Made when first needed, so a batch with nothing to run (or never iterated) holds none."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._loop.set_default_executor(UnwaitedExecutor())
        return self._loop

    def start(self, plan: Plan) -> None:
        self.plan = plan
        self.fleet = Fleet(plan.limits, plan.rates, window_s=plan.rate_window_s)
        self.runner = plan.worker(plan, InProcessFleetClient(self.fleet), host_name())
        self.contexts: dict[str, Any] = {}

    @property
    def node(self) -> str:
        return host_name()

    def admit(self, item: BatchItem, attempt: int) -> str | None:
        return self.fleet.admit(item.key, attempt)

    def finish(self, item: BatchItem, attempt: int) -> None:
        self.fleet.finish(item.key, attempt)

    def abandon(self, item: BatchItem, attempt: int) -> None:
        self.fleet.abandon(item.key, attempt)

    def submit(self, item: BatchItem, attempt: int) -> None:
        context = self.plan.contexts.context(item)
        task = self.loop.create_task(self.runner.run(item, context, attempt))
        self.tasks[task] = (item, attempt)

    def running(self) -> int:
        return len(self.tasks)

    def wait(self, timeout: float) -> list[Finished]:
        if not self.tasks:
            return []
        # a task of its own, so a Ctrl-C that lands in an item's step before the wait began leaves a
        # task that close() cancels and runs to its end (no "never awaited", no reused coroutine)
        waiter = self.loop.create_task(
            asyncio.wait(list(self.tasks), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        )
        try:
            done, _ = self.loop.run_until_complete(waiter)
        except BaseException:
            waiter.cancel()
            raise
        finished = []
        for task in done:
            item, attempt = self.tasks.pop(task)
            finished.append(Finished(item, attempt, task.result()))  # run() returns failures as lines
        return finished

    def totals(self) -> dict[str, Any]:
        return self.fleet.totals()

    def close(self) -> None:
        """Cancel what still runs (Ctrl-C) and let it end its traces and sandboxes."""
        if self._loop is None or self._loop.is_closed():
            return
        for task in self.tasks:
            task.cancel()
        if self.tasks:
            self.loop.run_until_complete(asyncio.wait(list(self.tasks), timeout=10))
        for task in self.tasks:  # an item whose step took the Ctrl-C holds it: retrieved, not logged
            if task.done() and not task.cancelled():
                task.exception()
        self.tasks.clear()
        if self.runner is not None:
            self.loop.run_until_complete(self.runner.aclose())
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()
