"""What the batch driver (rlmx.batch.runner) asks of an executor, and what it gives one: the plan (the
batch's options, limits and contexts) and the items, one attempt at a time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlmx.batch.client import FleetClient
from rlmx.batch.fleet import BatchLimits, RateSpec
from rlmx.batch.item_run import ItemRunner
from rlmx.batch.items import BatchItem
from rlmx.errors import RLMError


@dataclass
class Finished:
    """An attempt's end: its result line, or `lost` (its worker or node died) with why."""

    item: BatchItem
    attempt: int
    record: dict[str, Any] | None = None
    lost: str | None = None


class Contexts:
    """Each distinct context of a batch, scanned once on the driver (refusals before anything runs).
    `options`: include, exclude, gitignore, allow_empty_context."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self._by_key: dict[str, Any] = {}

    def context(self, item: BatchItem) -> Any:
        key = item.context_key()
        if key not in self._by_key:
            self._by_key[key] = self._load(item)
        return self._by_key[key]

    def _load(self, item: BatchItem) -> Any:
        from rlmx.context.context import Context

        spec = item.context
        if spec is None:
            return None
        if isinstance(spec, dict):
            ctx = Context.of(spec["text"])
        else:
            ctx = Context.from_paths(
                list(spec),
                include=self.options.get("include") or (),
                exclude=self.options.get("exclude") or (),
                gitignore=self.options.get("gitignore", True),
            )
        if not self.options.get("allow_empty_context"):
            ctx.check_usable()
        return ctx

    def check(self, items: list[BatchItem]) -> list[str]:
        """Problems, by input line, of the contexts `items` name (each scanned once)."""
        problems = []
        for item in items:
            try:
                self.context(item)
            except RLMError as exc:
                problems.append(f"line {item.line}: {exc}")
        return problems


class Worker(Protocol):
    """What runs an executor's items in a process: built once there (`Plan.worker`), then reused."""

    async def run(self, item: Any, context: Any, attempt: int) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...


def batch_worker(plan: Plan, client: FleetClient, node: str | None) -> Worker:
    """The worker of `rlmx batch`: an RLM run per item."""
    return ItemRunner(
        plan.specs,
        client,
        plan.limits,
        rated_models=frozenset(plan.rates),
        trace_dir=plan.trace_dir,
        node=node,
        trace_parent=plan.trace_parent,
        otel_export=plan.otel_export,
    )


@dataclass
class Plan:
    # each distinct item setting's spec, by rlmx.batch.item_run.rlm_key: RunSpec objects on the driver,
    # their data (RunSpec.to_data, keys sealed in `env`) in what the ray executor ships
    specs: dict[str, Any]
    limits: BatchLimits = field(default_factory=BatchLimits)
    rates: dict[str, RateSpec] = field(default_factory=dict)  # model -> its fleet-wide rate limit
    rate_window_s: float = 60.0
    trace_dir: str | None = None
    contexts: Contexts = field(default_factory=lambda: Contexts({}))
    cpus_per_item: float = 1.0
    env: dict[str, str] = field(default_factory=dict)  # what workers need in their environment (keys)
    # what runs the items, made once in each process (a top-level function: Ray pickles it by name)
    worker: Callable[[Plan, FleetClient, str | None], Worker] = batch_worker
    payload: Any = None  # what another kind of worker needs (rlmx eval's configuration)
    sealed_env: str = ""  # the keys, sealed, when the ray executor cannot put them in the job's runtime_env
    trace_parent: dict[str, str] = field(default_factory=dict)  # the batch span, as W3C headers
    otel_export: bool = False  # workers elsewhere set up OTLP export as the driver did (rlmx.telemetry.sdk)


class Executor(Protocol):
    name: str

    @property
    def node(self) -> str: ...

    def start(self, plan: Plan) -> None: ...

    def admit(self, item: BatchItem, attempt: int) -> str | None: ...

    def submit(self, item: BatchItem, attempt: int) -> None: ...

    def running(self) -> int: ...

    def wait(self, timeout: float) -> list[Finished]: ...

    def finish(self, item: BatchItem, attempt: int) -> None: ...

    def abandon(self, item: BatchItem, attempt: int) -> None: ...

    def totals(self) -> dict[str, Any]: ...

    def close(self) -> None: ...
