"""`rlmx eval --executor ray`: the suite's items as tasks of the batch's ray executor (rlmx.batch), each
item generated and run (the RLM and the baselines) on the node that takes it; the driver appends the
records to `results.jsonl` as they arrive, so a rerun resumes as with the local executor.

On the nodes the response cache is off (one SQLite file cannot be shared safely across machines) and
traces are written under `--out` as the node sees it: give a folder every node mounts to keep them."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlmx import telemetry
from rlmx.batch.client import FleetClient
from rlmx.batch.executor import Plan, Worker
from rlmx.batch.runner import Batch, make_executor
from rlmx.evals.records import RESULTS
from rlmx.telemetry import sdk


@dataclass(frozen=True)
class EvalJob:
    """One item of the suite and the methods still to run on it (what the executor schedules)."""

    family: str
    size: int
    index: int
    methods: tuple[str, ...]
    context: None = None
    line: int = 0

    @property
    def key(self) -> str:
        return f"{self.family}/{self.size}/{self.index}"

    def context_key(self) -> str:
        return "null"


class EvalWorker:
    """A process's runner of eval jobs (its models built once)."""

    def __init__(self, runner: Any, node: str | None, plan: Plan | None = None) -> None:
        self.node = node
        self.runner = runner  # an rlmx.evals.runner.Runner
        self.runner.prepare_models()
        self.trace_parent = dict(plan.trace_parent) if plan else {}  # the batch span, as W3C headers
        self.otel_export = bool(plan and plan.otel_export)

    async def run(self, job: EvalJob, context: Any, attempt: int) -> dict[str, Any]:
        """The job's line, under a span of its own when telemetry is on (exported here as the driver
        does, on a Ray node)."""
        if self.otel_export:
            sdk.start()
        attrs = {"rlmx.batch.item_id": job.key, "rlmx.batch.attempt": attempt, "rlmx.node": self.node}
        with telemetry.span_context("rlmx batch item", attrs, carrier=self.trace_parent):
            line = await self._run(job, attempt)
        if self.otel_export:
            sdk.flush()
        return line

    async def _run(self, job: EvalJob, attempt: int) -> dict[str, Any]:
        started = time.monotonic()
        try:
            records = await self.runner.run_job(job.family, job.size, job.index, job.methods)
            error = None
        except Exception as exc:  # the job's failure, reported by the driver (its methods rerun next time)
            records, error = [], f"{type(exc).__name__}: {exc}"
        return {
            "id": job.key,
            "records": records,
            "stopped_by": "error" if error else "final",
            "error": error,
            "attempts": attempt,
            "node": self.node,
            "elapsed_s": round(time.monotonic() - started, 3),
        }

    async def aclose(self) -> None:
        return None


def eval_worker(plan: Plan, client: FleetClient, node: str | None) -> Worker:
    runner_class, config = plan.payload
    return EvalWorker(runner_class(config), node, plan)


def run_on_ray(
    runner_class: type, config: Any, jobs: list[EvalJob], *, log: Callable[[str], None]
) -> list[dict[str, Any]]:
    """Run `jobs` on the Ray cluster at `config.address` (None: a local Ray), each node making its own
    `runner_class(config)` (rlmx.evals.runner.Runner); returns the records written."""
    from rlmx.batch.settings import model_env

    node_config = dataclasses.replace(
        config, cache=False, out=config.out.resolve(), executor="local", address=None
    )
    models = {m for m in (config.model, config.sub_model) if m}
    plan = Plan(specs={}, worker=eval_worker, payload=(runner_class, node_config), env=model_env(models))
    if sdk.started():  # `--otel`: the nodes export too, the OTLP variables sealed with the keys
        plan.env.update(telemetry.export_env())
        plan.otel_export = True
    batch = Batch(
        jobs,  # type: ignore[arg-type]  # the executor needs only .key, .context and .context_key()
        make_executor("ray", config.address),
        plan,
        out=None,
        retry_failed=False,
        concurrency=config.concurrency,
        max_attempts=3,
        on_progress=None,
    )
    written: list[dict[str, Any]] = []
    with (config.out / RESULTS).open("a", encoding="utf-8") as handle:
        for result in batch:
            if result.get("error"):
                log(f"{result['id']}: failed on {result.get('node')}: {result['error']}")
            for record in result.get("records") or []:
                handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
                handle.flush()
                written.append(record)
                log(
                    f"{record['item_id']} {record['method']}: score {record['score']:.3f} "
                    f"({record['stopped_by']}, {record['elapsed_s']:.1f}s, node {str(result.get('node'))[:8]})"
                )
    return written
