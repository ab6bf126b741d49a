"""One item of a batch, run where an executor put it: its RLM built from the item's spec (the batch's,
with the item's own model, limits and schema), its calls checked against the batch's fleet, its result
line made.

The driver makes each distinct setting's `RunSpec` (rlmx.batch.runner); a Ray task gets it as data
(`RunSpec.to_data`: no API key, which each process reads from its environment or the sealed one)."""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rlmx.batch.client import FleetClient, FleetRateLimiter, ItemBudget
from rlmx.batch.fleet import BatchLimits
from rlmx.batch.items import BatchItem
from rlmx.errors import RLMError
from rlmx.spec.run import ModelRef, RunSpec


def with_limiters(spec: RunSpec, limiter: Callable[[str], Any]) -> RunSpec:
    """`spec` with each model string or `ModelRef` whose model has a fleet-wide rate limit
    (`limiter(name)` not None) reaching it through that limiter. LM objects are left as they are."""
    made: dict[Any, Any] = {}
    sub_options = spec.model_options if spec.sub_model_options is None else spec.sub_model_options

    def ref(model: Any, options: Any) -> Any:
        key: tuple[Any, ...]
        if isinstance(model, str):
            key, name = (model, id(options)), model
        elif isinstance(model, ModelRef):
            key, name, options = (id(model),), model.name, model.options
        else:
            return model
        shared = limiter(name)
        if shared is None:
            return model
        if key not in made:
            made[key] = ModelRef(name, replace(options, shared_limiter=shared))
        return made[key]

    sub = spec.model if spec.sub_model is None and spec.sub_model_options is not None else spec.sub_model
    return spec.replace(
        model=ref(spec.model, spec.model_options),
        sub_model=ref(sub, sub_options) if sub is not None else None,
        models_by_depth={
            d: ref(m, spec.model_options if int(d) == 0 else sub_options)
            for d, m in spec.models_by_depth.items()
        },
    )


def rlm_key(item: BatchItem) -> str:
    """Items with the same key share one RLM (and its model connections) in a process."""
    return json.dumps([item.model, item.sub_model, item.limits, item.output_schema], sort_keys=True)


def host_name() -> str:
    return socket.gethostname()


class ItemRunner:
    """Builds, once per process and setting, the RLMs a batch's items need, and runs items."""

    def __init__(
        self,
        specs: Mapping[str, RunSpec | dict[str, Any]],
        client: FleetClient,
        limits: BatchLimits,
        *,
        rated_models: frozenset[str] = frozenset(),
        trace_dir: str | None = None,
        node: str | None = None,
        trace_parent: Mapping[str, str] | None = None,
        otel_export: bool = False,
    ) -> None:
        self.specs = specs  # by rlm_key: RunSpec objects, or their data (on a Ray node)
        self.client = client
        self.limits = limits
        self.rated_models = rated_models
        self.trace_dir = trace_dir
        self.node = node or host_name()
        self.trace_parent = dict(trace_parent or {})  # the batch span each item's span goes under
        self.otel_export = otel_export
        self._built: dict[str, Any] = {}
        self._limiters: dict[str, FleetRateLimiter] = {}

    def limiter(self, model: str) -> FleetRateLimiter | None:
        if model not in self.rated_models:
            return None
        if model not in self._limiters:
            self._limiters[model] = FleetRateLimiter(self.client, model)
        return self._limiters[model]

    def built(self, item: BatchItem) -> Any:
        """The item's RLM, built on first use in this process; refusals raise here."""
        from rlmx.rlm import RLM

        key = rlm_key(item)
        if key not in self._built:
            spec = self.specs[key]
            if not isinstance(spec, RunSpec):
                spec = RunSpec.from_data(spec)
            self._built[key] = RLM.from_spec(with_limiters(spec, self.limiter))
        return self._built[key]

    async def aclose(self) -> None:
        """Close the model connections of the RLMs built in the running event loop."""
        for rlm in self._built.values():
            await rlm.aclose()

    async def run(self, item: BatchItem, context: Any, attempt: int) -> dict[str, Any]:
        """The item's result line (its failure included: never raised), under the item's span."""
        from rlmx import telemetry

        if self.otel_export:  # a worker process of its own (Ray): export as the driver does
            from rlmx.telemetry import sdk

            sdk.start()
        attrs = {"rlmx.batch.item_id": item.id, "rlmx.batch.attempt": attempt, "rlmx.node": self.node}
        with telemetry.span_context("rlmx batch item", attrs, carrier=self.trace_parent) as span:
            line = await self._run(item, context, attempt)
            if span is not None:
                span.set_attribute("rlmx.stop_reason", str(line.get("stopped_by")))
        if self.otel_export:
            sdk.flush()
        return line

    async def _run(self, item: BatchItem, context: Any, attempt: int) -> dict[str, Any]:
        started = time.monotonic()
        run_id = uuid.uuid4().hex[:12]
        trace_to = None
        if self.trace_dir:
            trace_to = Path(self.trace_dir) / f"{safe_name(item.key)}.{attempt}.{run_id}.jsonl"
        budget = ItemBudget(self.client, self.limits, item.key, attempt)
        try:
            result = await self.built(item).arun(
                item.question, context, shared=budget, trace_to=trace_to, run_id=run_id
            )
        except RLMError as exc:  # refused before or while running (a context found empty, a bad setting)
            return self.record(item, attempt, started, error=str(exc), trace=trace_to)
        except Exception as exc:  # a machinery failure: the item's error, in full, in its result line
            return self.record(item, attempt, started, error=f"{type(exc).__name__}: {exc}", trace=trace_to)
        return result_line(
            item,
            answer=result.answer,
            answer_source=result.answer_source,
            stopped_by=result.stopped_by,
            usage=result.usage,
            error=result.error,
            elapsed_s=time.monotonic() - started,
            trace_path=result.trace_path,
            attempts=attempt,
            node=self.node,
            sandbox=result.sandbox,
        )

    def record(
        self, item: BatchItem, attempt: int, started: float, *, error: str, trace: Path | None
    ) -> dict[str, Any]:
        return failed_record(
            item,
            error,
            attempts=attempt,
            node=self.node,
            elapsed_s=time.monotonic() - started,
            trace_path=str(trace) if trace and trace.exists() else None,
        )


def failed_record(
    item: BatchItem,
    error: str | None,
    *,
    attempts: int,
    node: str | None,
    elapsed_s: float = 0.0,
    stopped_by: str = "error",
    trace_path: str | None = None,
) -> dict[str, Any]:
    """A result line for an item that produced no run result: it failed, or never started."""
    return result_line(
        item,
        stopped_by=stopped_by,
        error=error,
        elapsed_s=elapsed_s,
        trace_path=trace_path,
        attempts=attempts,
        node=node,
    )


def result_line(
    item: BatchItem,
    *,
    stopped_by: str,
    attempts: int,
    node: str | None,
    answer: Any = None,
    answer_source: str = "none",
    usage: dict[str, Any] | None = None,
    error: str | None = None,
    elapsed_s: float = 0.0,
    trace_path: str | None = None,
    sandbox: str = "",
) -> dict[str, Any]:
    """An item's line in the results file (rlmx.batch.results.FIELDS, and `meta` when the input has it).
    `sandbox`: the isolation layer the item's model code ran in on `node` ("" when no cell ran)."""
    return {
        "id": item.id,
        "answer": answer,
        "answer_source": answer_source,
        "stopped_by": stopped_by,
        "usage": usage or {},
        "error": error,
        "elapsed_s": round(elapsed_s, 3),
        "trace_path": trace_path,
        "attempts": attempts,
        "node": node,
        "sandbox": sandbox,
        **({"meta": item.meta} if item.meta is not None else {}),
    }


def safe_name(key: str) -> str:
    """An id as part of a file name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", key)[:80] or "item"
