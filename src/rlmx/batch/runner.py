"""The batch driver: which items to run (resume), admitting them to the fleet, retrying attempts lost with
their worker, writing each result as it arrives, and the summary. What `rlmx batch` and `rlmx eval
--executor ray` use; see `rlmx.batch.run`."""

from __future__ import annotations

import os
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlmx import telemetry
from rlmx.batch.executor import Contexts, Executor, Plan
from rlmx.batch.fleet import BatchLimits
from rlmx.batch.item_run import failed_record
from rlmx.batch.items import BatchItem
from rlmx.batch.results import ResultsFile, is_failed, is_unstarted
from rlmx.errors import ConfigError
from rlmx.outcomes import BATCH_LIMIT_REASONS, EXIT_LIMIT, EXIT_OK, EXIT_RUN_ERROR
from rlmx.telemetry import sdk
from rlmx.usage import cost_text

Say = Callable[[str], None]


@dataclass
class Summary:
    total: int  # items in the input
    skipped: int  # already in the results file
    ran: int = 0  # results written by this run
    by_stopped: Counter[str] = field(default_factory=Counter)  # every input id's latest result
    failed: int = 0
    running: int = 0
    fleet: dict[str, Any] = field(default_factory=dict)  # the batch ledger's totals
    wall_s: float = 0.0
    lost_attempts: int = 0

    @property
    def items_per_min(self) -> float:
        return 60.0 * self.ran / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def exit_code(self) -> int:
        """0 when every item ended `final`, 3 when some stopped at a limit and none failed, else 1."""
        if self.failed:
            return EXIT_RUN_ERROR
        return EXIT_OK if set(self.by_stopped) <= {"final"} else EXIT_LIMIT

    def lines(self) -> list[str]:
        stops = ", ".join(f"{n} {reason}" for reason, n in self.by_stopped.most_common())
        fleet = self.fleet
        usage = (
            f"{fleet.get('calls', 0)} model calls, {fleet.get('total_tokens', 0):,} tokens, "
            f"{cost_text(fleet.get('cost_usd', 0.0))}"
        )
        if fleet.get("lost_calls"):
            usage += f" ({fleet['lost_calls']} calls of lost attempts booked at their estimates)"
        out = [
            f"[rlmx] batch: {self.total} items; {self.ran} run now, {self.skipped} already done; by outcome: "
            f"{stops or 'none'}",
            f"[rlmx] usage: {usage}; {self.wall_s:.1f} s wall, {self.items_per_min:.1f} items/min",
        ]
        if fleet.get("reached"):
            out.append(
                f"[rlmx] the batch limit {fleet['reached']} was reached: items not started are written with "
                "that stopped_by; run the same command with a higher limit to finish them"
            )
        if self.lost_attempts:
            out.append(f"[rlmx] {self.lost_attempts} attempts were lost with their worker and retried")
        return out


class Batch:
    """Iterate for the results written by this run, as they finish; `summary` is complete afterwards."""

    def __init__(
        self,
        items: list[BatchItem],
        executor: Executor,
        plan: Plan,
        *,
        out: Path | None,
        retry_failed: bool,
        concurrency: int,
        max_attempts: int,
        on_progress: Callable[[Summary], None] | None,
    ) -> None:
        self.items = items
        self.executor = executor
        self.plan = plan
        self.results = ResultsFile(out) if out is not None else None
        self.retry_failed = retry_failed
        self.concurrency = concurrency
        self.max_attempts = max_attempts
        self.on_progress = on_progress
        self.latest = self.results.load() if self.results else {}
        self.todo = [item for item in items if self._needs_run(item)]
        self.summary = Summary(total=len(items), skipped=len(items) - len(self.todo))

    def _needs_run(self, item: BatchItem) -> bool:
        record = self.latest.get(item.key)
        if record is None or is_unstarted(record):
            return True
        return self.retry_failed and is_failed(record)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        started = time.monotonic()
        pending = deque(self.todo)
        attempts: Counter[str] = Counter()
        executor = self.executor
        begun = False
        span = telemetry.open_span(
            "rlmx batch",
            {
                "rlmx.batch.items": len(self.items),
                "rlmx.batch.to_run": len(self.todo),
                "rlmx.executor": executor.name,
            },
        )
        self.plan.trace_parent = telemetry.carrier_of(span)
        try:
            if self.todo:
                executor.start(self.plan)
                begun = True
            while pending or executor.running():
                while pending and executor.running() < self.concurrency:
                    item = pending.popleft()
                    attempts[item.key] += 1
                    refusal = executor.admit(item, attempts[item.key])
                    if refusal is not None:
                        record = failed_record(
                            item, None, attempts=attempts[item.key] - 1, node=None, stopped_by=refusal
                        )
                        yield self._write(record)
                        continue
                    executor.submit(item, attempts[item.key])
                for done in executor.wait(timeout=0.5):
                    if done.record is not None:
                        executor.finish(done.item, done.attempt)
                        yield self._write(done.record)
                        continue
                    executor.abandon(done.item, done.attempt)
                    self.summary.lost_attempts += 1
                    if done.attempt < self.max_attempts:
                        pending.appendleft(done.item)
                    else:
                        why = f"lost with its worker in all {done.attempt} attempts; last: {done.lost}"
                        yield self._write(failed_record(done.item, why, attempts=done.attempt, node=None))
                self._progress(started, executor.running())
        finally:
            self.summary.wall_s = time.monotonic() - started
            try:
                if begun:
                    self.summary.fleet = executor.totals()
            finally:
                # always, even with nothing to run (the local executor holds an event loop from the
                # start) and when the fleet is gone: tasks cancelled, a Ray we started stopped
                executor.close()
                self._tally()
                self._compact()
                telemetry.close_span(span, {"rlmx.batch.ran": self.summary.ran})

    def _write(self, record: dict[str, Any]) -> dict[str, Any]:
        if self.results is not None:
            self.results.append(record)
        self.latest[str(record["id"])] = record
        self.summary.ran += 1
        self.summary.running = self.executor.running()
        self.summary.fleet = self.executor.totals()  # the item's line shows the spend it included
        return record

    def _progress(self, started: float, running: int) -> None:
        if self.on_progress is None:
            return
        self.summary.wall_s = time.monotonic() - started
        self.summary.running = running
        self._tally()
        self.summary.fleet = self.executor.totals()
        self.on_progress(self.summary)

    def _tally(self) -> None:
        records = [self.latest[item.key] for item in self.items if item.key in self.latest]
        self.summary.by_stopped = Counter(str(r.get("stopped_by")) for r in records)
        self.summary.failed = sum(1 for r in records if is_failed(r))

    def _compact(self) -> None:
        """One line an id (the latest), atomically, when this run superseded earlier lines."""
        if self.results is None or not self.results.path.exists():
            return
        self.results.close()
        latest = self.results.load()
        if self.results.lines == len(latest) and not self.results.dropped_partial:
            return
        order = [item.key for item in self.items if item.key in latest]
        order += [key for key in latest if key not in set(order)]
        self.results.rewrite(latest[key] for key in order)


def run(
    items: list[BatchItem] | list[dict[str, Any]],
    rlm: Any = None,
    *,
    options: Any = None,
    out: str | os.PathLike[str] | None = None,
    executor: str | Executor = "local",
    address: str | None = None,
    concurrency: int = 4,
    limits: BatchLimits | None = None,
    rpm: int | None = None,
    tpm: int | None = None,
    rate_window_s: float = 60.0,
    trace_dir: str | os.PathLike[str] | None = None,
    retry_failed: bool = False,
    max_attempts: int = 3,
    cpus_per_item: float = 1.0,
    include: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
    gitignore: bool = True,
    on_progress: Callable[[Summary], None] | None = None,
    say: Say | None = None,
) -> Batch:
    """Run `items` (BatchItem objects, or dicts shaped as the JSONL lines), each as a run of `rlm` (an
    `RLM` or a `RunSpec`) with the item's own `model`, `sub_model`, `limits` and `output_schema` over
    it; or, instead of `rlm`, `options` (`rlmx.spec.options.RunOptions`, what the command line states:
    each item's settings go through the configuration files there). `include` / `exclude` /
    `gitignore`: how files of an item's folder context are picked (with `options`: its own).

    Returns a `Batch`: iterate it for the results as they finish (nothing runs before); with `out`,
    each is also appended (fsync'd) to that JSONL file, and ids already there are skipped (resume).
    Everything is checked before the first item runs: the items, their contexts, their models and
    settings (ConfigError, BatchInputError naming the input lines)."""
    from rlmx.batch.items import check_items
    from rlmx.batch.settings import ItemSettings, model_env, rates_for, validate
    from rlmx.spec.options import to_stderr

    say = say or to_stderr
    if (rlm is None) == (options is None):
        raise ConfigError("rlmx.batch.run: give the items' RLM (an RLM or a RunSpec), or `options`, not both")
    if concurrency < 1:
        raise ConfigError("`concurrency` must be at least 1 (items run at the same time)")
    if max_attempts < 1:
        raise ConfigError("`max_attempts` must be at least 1")
    if rate_window_s <= 0:
        raise ConfigError("`rate_window_s` must be > 0 seconds")
    given = [i for i in items if isinstance(i, BatchItem)]
    if given and len(given) != len(items):
        raise ConfigError("rlmx.batch.run: give the items as BatchItem objects or as dicts, not both")
    checked = given or check_items([i for i in items if not isinstance(i, BatchItem)])
    settings = ItemSettings.of(rlm, options, include=include, exclude=exclude, gitignore=gitignore)
    plan = Plan(
        specs={},
        limits=limits or BatchLimits(),
        rate_window_s=rate_window_s,
        trace_dir=str(Path(trace_dir).resolve()) if trace_dir else None,
        contexts=Contexts(settings.context_options()),
        cpus_per_item=cpus_per_item,
    )
    models = validate(checked, plan, settings, say)
    plan.rates = rates_for(models, settings.config, rpm, tpm)
    plan.env = model_env(models, settings.config)
    if sdk.started():  # the command set OTLP export up: Ray workers do too, its headers sealed with the keys
        plan.env.update(telemetry.export_env())
        plan.otel_export = True
    if trace_dir:
        Path(trace_dir).mkdir(parents=True, exist_ok=True)
    if isinstance(executor, str):
        executor = make_executor(executor, address)
    return Batch(
        checked,
        executor,
        plan,
        out=Path(out) if out is not None else None,
        retry_failed=retry_failed,
        concurrency=concurrency,
        max_attempts=max_attempts,
        on_progress=on_progress,
    )


def make_executor(name: str, address: str | None = None) -> Executor:
    if name == "local":
        if address:
            raise ConfigError("`address` is for the ray executor; the local executor runs in this process")
        from rlmx.batch.in_process import InProcessExecutor

        return InProcessExecutor()
    if name == "ray":
        from rlmx.batch.ray_executor import RayExecutor

        return RayExecutor(address)
    raise ConfigError(f"unknown executor {name!r}; choose local or ray")


__all__ = ["BATCH_LIMIT_REASONS", "Batch", "BatchLimits", "Summary", "run"]
